#include "redis_cluster.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "child_process.hpp"
#include "free_port.hpp"

#ifndef IDEM_REDIS_CLI
#define IDEM_REDIS_CLI "redis-cli"
#endif

namespace idem::test {
namespace {

using namespace std::chrono_literals;

std::string address(const redis_endpoint& at) {
    return at.host + ":" + std::to_string(at.port);
}

std::string text_of(const redisReply& r) {
    return {r.str, r.len};
}

// Runs `command` on `at` and returns its text; throws on an error reply.
std::string checked(const redis_endpoint& at, std::initializer_list<std::string_view> command) {
    redis_client client(at);
    const auto r = client.command(command);
    if (r->type == REDIS_REPLY_ERROR)
        throw std::runtime_error(address(at) + " refused " + std::string(*command.begin()) + ": " + text_of(*r));
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ? text_of(*r) : std::string();
}

void wait_for(const std::function<bool()>& done, std::chrono::milliseconds timeout, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("redis cluster: " + what + " within " + std::to_string(timeout.count()) + " ms");
        std::this_thread::sleep_for(20ms);
    }
}

bool same_masters(const std::vector<redis_cluster::shard>& a, const std::vector<redis_cluster::shard>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
        return x.first_slot == y.first_slot && x.last_slot == y.last_slot && x.master.port == y.master.port;
    });
}

}  // namespace

redis_cluster::redis_cluster(int masters) {
    for (int i = 0; i < 2 * masters; ++i)
        servers_.push_back(std::make_unique<redis_server>(std::vector<std::string>{
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port",
            std::to_string(free_loopback_port()), "--cluster-node-timeout", "3000"}));

    spawn_options create;
    create.argv = {IDEM_REDIS_CLI, "--cluster", "create"};
    for (const auto& node : nodes()) create.argv.push_back(address(node));
    create.argv.insert(create.argv.end(), {"--cluster-replicas", "1", "--cluster-yes"});
    create.pipe_stdout = true;
    child_process cli(std::move(create));
    std::string output;
    while (const auto line = cli.read_line(60s)) output += *line + "\n";
    const int status = cli.reap();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error("redis-cli --cluster create failed:\n" + output);
    wait_until_settled();
}

std::vector<redis_endpoint> redis_cluster::nodes() const {
    std::vector<redis_endpoint> all;
    for (const auto& server : servers_) all.push_back(server->endpoint());
    return all;
}

std::vector<redis_cluster::shard> redis_cluster::shards(const redis_endpoint& asked) const {
    redis_client client(asked);
    const auto r = client.command({"CLUSTER", "SLOTS"});
    if (r->type != REDIS_REPLY_ARRAY) throw std::runtime_error("CLUSTER SLOTS: " + text_of(*r));
    std::vector<shard> all;
    const auto endpoint_of = [&](const redisReply& node) {
        const std::string host = text_of(*node.element[0]);
        return redis_endpoint{host.empty() ? asked.host : host, static_cast<int>(node.element[1]->integer)};
    };
    for (std::size_t i = 0; i < r->elements; ++i) {
        const redisReply& range = *r->element[i];
        shard s{static_cast<int>(range.element[0]->integer),
                static_cast<int>(range.element[1]->integer),
                endpoint_of(*range.element[2]),
                {}};
        for (std::size_t j = 3; j < range.elements; ++j) s.replicas.push_back(endpoint_of(*range.element[j]));
        all.push_back(std::move(s));
    }
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first_slot < b.first_slot; });
    return all;
}

redis_cluster::shard redis_cluster::shard_of(int slot) const {
    for (auto& s : shards(nodes().front()))
        if (s.first_slot <= slot && slot <= s.last_slot) return s;
    throw std::runtime_error("redis cluster: no master serves slot " + std::to_string(slot));
}

std::string redis_cluster::node_id(const redis_endpoint& node) const {
    return checked(node, {"CLUSTER", "MYID"});
}

int redis_cluster::migrate_slot(int slot, const redis_endpoint& from, const redis_endpoint& to, int batch,
                                const std::function<void()>& between_batches) {
    const std::string number = std::to_string(slot);
    const std::string from_id = node_id(from);
    const std::string to_id = node_id(to);
    // Importing first, so no moment exists where the source sends ASK to a target that refuses it.
    (void)checked(to, {"CLUSTER", "SETSLOT", number, "IMPORTING", from_id});
    (void)checked(from, {"CLUSTER", "SETSLOT", number, "MIGRATING", to_id});

    redis_client source(from);
    const std::string batch_size = std::to_string(batch);
    const std::string to_port = std::to_string(to.port);
    int moved = 0;
    for (;;) {
        const auto keys = source.command({"CLUSTER", "GETKEYSINSLOT", number, batch_size});
        if (keys->type != REDIS_REPLY_ARRAY) throw std::runtime_error("GETKEYSINSLOT: " + text_of(*keys));
        if (keys->elements == 0) break;
        for (std::size_t i = 0; i < keys->elements; ++i) {
            const auto r = source.command({"MIGRATE", to.host, to_port, text_of(*keys->element[i]), "0", "5000"});
            if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("MIGRATE: " + text_of(*r));
            ++moved;
        }
        between_batches();
    }
    // The target first, so it serves the slot before the source starts sending MOVED.
    (void)checked(to, {"CLUSTER", "SETSLOT", number, "NODE", to_id});
    (void)checked(from, {"CLUSTER", "SETSLOT", number, "NODE", to_id});
    for (const auto& s : shards(to))  // the other masters (replicas learn it from theirs)
        if (s.master.port != from.port && s.master.port != to.port)
            (void)checked(s.master, {"CLUSTER", "SETSLOT", number, "NODE", to_id});
    wait_until_settled();
    return moved;
}

void redis_cluster::fail_over(const redis_endpoint& replica) {
    wait_for(
        [&] {
            return checked(replica, {"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
        },
        10s, "the replica did not reach its master");
    (void)checked(replica, {"CLUSTER", "FAILOVER"});
    wait_for(
        [&] {
            return checked(replica, {"INFO", "replication"}).find("role:master") != std::string::npos;
        },
        20s, "the replica did not take over");
    wait_until_settled();
}

void redis_cluster::wait_until_settled(std::chrono::milliseconds timeout) const {
    wait_for(
        [&] {
            try {
                const auto reference = shards(nodes().front());
                int covered = 0;
                for (const auto& s : reference) {
                    covered += s.last_slot - s.first_slot + 1;
                    if (s.replicas.empty()) return false;  // a replica not attached yet
                }
                if (covered != 16384) return false;
                for (const auto& node : nodes()) {
                    if (checked(node, {"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
                    if (!same_masters(shards(node), reference)) return false;
                }
                return true;
            } catch (const std::runtime_error&) {
                return false;  // a node busy joining
            }
        },
        timeout, "the nodes did not agree on the slots");
}

}  // namespace idem::test
