// The Redis store on a real Redis Cluster: 3 masters and 3 replicas this process starts.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "free_port.hpp"
#include "hash_slot.hpp"
#include "helpers.hpp"
#include "idem/redis_store.hpp"
#include "redis_cluster.hpp"
#include "temp_dir.hpp"

using namespace idem;
using namespace std::chrono_literals;
using status = reservation_status;
using redis_detail::hash_slot;
using test::caught_store_error;
using test::fresh_namespace;

namespace {

using clock_type = std::chrono::steady_clock;

// The cluster the tests that leave its topology alone share.
test::redis_cluster& shared_cluster() {
    static test::redis_cluster cluster;
    return cluster;
}

redis_options cluster_options(const test::redis_cluster& cluster) {
    redis_options options;
    options.cluster = true;
    options.host = cluster.nodes().front().host;
    options.port = cluster.nodes().front().port;
    options.pool_size = 16;
    return options;
}

// readme:begin redis-cluster
std::shared_ptr<idem::redis_store> make_cluster_store(const std::vector<idem::redis_node>& nodes) {
    idem::redis_options redis;
    redis.cluster = true;
    redis.host = nodes.front().host;  // any node; the others are asked when it does not answer
    redis.port = nodes.front().port;
    redis.cluster_seeds.assign(nodes.begin() + 1, nodes.end());
    auto store = std::make_shared<idem::redis_store>(redis);
    store->ping();  // loads the slot map and PINGs every master
    return store;
}

// One customer's records share the slot of the tag {customer_id}, so one master holds them.
idem::record_key customer_key(const std::string& customer_id, const std::string& request_id) {
    return idem::record_key("orders{" + customer_id + "}", request_id);
}
// readme:end redis-cluster

std::string read(const std::string& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

// How many times `node` ran `command` since it started.
long long calls(const test::redis_endpoint& node, const std::string& command) {
    test::redis_client raw(node);
    std::istringstream info(raw.text({"INFO", "commandstats"}));
    const std::string prefix = "cmdstat_" + command + ":calls=";
    for (std::string line; std::getline(info, line);)
        if (line.starts_with(prefix)) return std::stoll(line.substr(prefix.size()));
    return 0;
}

// How many `code` error replies `node` sent since it started (INFO errorstats).
long long errors_sent(const test::redis_endpoint& node, const std::string& code) {
    test::redis_client raw(node);
    std::istringstream info(raw.text({"INFO", "errorstats"}));
    const std::string prefix = "errorstat_" + code + ":count=";
    for (std::string line; std::getline(info, line);)
        if (line.starts_with(prefix)) return std::stoll(line.substr(prefix.size()));
    return 0;
}

long long keys_in_slot(const test::redis_endpoint& node, int slot) {
    test::redis_client raw(node);
    return std::stoll(raw.text({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}));
}

std::string failure_name(store_failure f) {
    switch (f) {
        case store_failure::connection_lost: return "connection_lost";
        case store_failure::timeout: return "timeout";
        case store_failure::conflict: return "conflict";
        case store_failure::lost_race: return "lost_race";
        case store_failure::corrupt_record: return "corrupt_record";
        case store_failure::unsupported: return "unsupported";
        case store_failure::schema: return "schema";
        case store_failure::constraint: return "constraint";
        case store_failure::other: return "other";
    }
    return "?";
}

// Threads reserving fresh keys, `contenders` calls racing on each, while the cluster
// changes under them. Every second key is completed with a payload naming it.
class traffic {
public:
    static constexpr int contenders = 4;
    static constexpr int max_keys = 1 << 17;

    traffic(redis_store& store, std::vector<std::string> namespaces, int threads)
        : store_(store), namespaces_(std::move(namespaces)), winners_(max_keys), failed_(max_keys) {
        for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { run(); });
    }
    ~traffic() { stop(); }

    void stop() {
        stop_ = true;
        threads_.clear();
    }

    [[nodiscard]] record_key key(int k) const {
        return {namespaces_[static_cast<std::size_t>(k) % namespaces_.size()], "k" + std::to_string(k)};
    }
    [[nodiscard]] int keys() const { return std::min(max_keys, (next_call_.load() + contenders - 1) / contenders); }
    // Keys won more than once, among the first `below`.
    [[nodiscard]] int duplicates(int below = max_keys) const {
        int n = 0;
        for (int k = 0; k < std::min(keys(), below); ++k) n += winners_[static_cast<std::size_t>(k)] > 1 ? 1 : 0;
        return n;
    }
    // Keys no call failed on that nobody won: a reserve that was lost.
    [[nodiscard]] int unowned() const {
        int n = 0;
        for (int k = 0; k < keys(); ++k)
            n += winners_[static_cast<std::size_t>(k)] == 0 && !failed_[static_cast<std::size_t>(k)] ? 1 : 0;
        return n;
    }
    [[nodiscard]] int untyped_errors() const { return untyped_; }
    [[nodiscard]] int wrong_payloads() const { return wrong_payloads_; }
    [[nodiscard]] int refused_completions() const { return refused_; }
    [[nodiscard]] int reserved_since(clock_type::time_point t) {
        std::lock_guard lock(mutex_);
        return static_cast<int>(std::count_if(wins_at_.begin(), wins_at_.end(), [&](auto at) { return at >= t; }));
    }
    // "timeout/TRYAGAIN" -> count, for the errors after `t`.
    [[nodiscard]] std::map<std::string, int> errors_since(clock_type::time_point t) {
        std::lock_guard lock(mutex_);
        std::map<std::string, int> kinds;
        for (const auto& [at, kind] : errors_)
            if (at >= t) ++kinds[kind];
        return kinds;
    }
    [[nodiscard]] std::string first_errors() {
        std::lock_guard lock(mutex_);
        return messages_;
    }

    // Every key won by one call and never failed on (among the first `below`) is still there:
    // in flight, or completed with its own payload. A reserve now would be a second owner.
    [[nodiscard]] std::map<std::string, int> sweep(int below = max_keys) {
        std::map<std::string, int> seen;
        for (int k = 0; k < std::min(keys(), below); ++k) {
            if (winners_[static_cast<std::size_t>(k)] != 1 || failed_[static_cast<std::size_t>(k)]) continue;
            const auto r = store_.try_reserve(key(k), "fp", 5min);
            if (r.status == status::completed && r.payload != payload(k)) ++seen["wrong payload"];
            ++seen[r.status == status::reserved    ? "reserved again"
                   : r.status == status::completed ? "completed"
                                                   : "in flight"];
        }
        return seen;
    }

private:
    static std::string payload(int k) { return "v" + std::to_string(k); }

    void run() {
        while (!stop_) {
            const int k = next_call_.fetch_add(1) / contenders;
            if (k >= max_keys) return;
            try {
                const auto r = store_.try_reserve(key(k), "fp", 5min);
                if (r.status == status::reserved) {
                    ++winners_[static_cast<std::size_t>(k)];
                    {
                        std::lock_guard lock(mutex_);
                        wins_at_.push_back(clock_type::now());
                    }
                    if (k % 2 == 0 && !store_.complete(key(k), r.token, "fp", payload(k), 5min)) ++refused_;
                } else if (r.status == status::completed && r.payload != payload(k)) {
                    ++wrong_payloads_;
                }
            } catch (const store_error& e) {
                failed_[static_cast<std::size_t>(k)] = true;
                std::lock_guard lock(mutex_);
                errors_.emplace_back(clock_type::now(), failure_name(e.failure()) + "/" + e.native_code());
                if (errors_.size() <= 3) messages_ += std::string(e.what()) + "\n";
            } catch (const std::exception& e) {
                failed_[static_cast<std::size_t>(k)] = true;
                ++untyped_;
                std::lock_guard lock(mutex_);
                messages_ += std::string("untyped: ") + e.what() + "\n";
            }
        }
    }

    redis_store& store_;
    const std::vector<std::string> namespaces_;
    std::atomic<bool> stop_{false};
    std::atomic<int> next_call_{0};
    std::vector<std::atomic<int>> winners_;
    std::vector<std::atomic<bool>> failed_;
    std::atomic<int> untyped_{0}, wrong_payloads_{0}, refused_{0};
    std::mutex mutex_;
    std::vector<clock_type::time_point> wins_at_;
    std::vector<std::pair<clock_type::time_point, std::string>> errors_;
    std::string messages_;
    std::vector<std::jthread> threads_;
};

std::string describe(const std::map<std::string, int>& counts) {
    if (counts.empty()) return "none";
    std::string text;
    for (const auto& [kind, n] : counts) text += (text.empty() ? "" : ", ") + kind + " x" + std::to_string(n);
    return text;
}

// What a run under a moving cluster must show, whatever moved.
void check_no_duplicate_and_resumed(traffic& t, clock_type::time_point settled) {
    CHECK(t.duplicates() == 0);
    CHECK(t.unowned() == 0);
    CHECK(t.untyped_errors() == 0);
    CHECK(t.wrong_payloads() == 0);
    CHECK(t.refused_completions() == 0);
    CHECK_MESSAGE(t.errors_since(settled).empty(), describe(t.errors_since(settled)));
    CHECK(t.reserved_since(settled) > 100);
    const auto swept = t.sweep();
    CHECK_MESSAGE(swept.count("reserved again") == 0, describe(swept));
    CHECK_MESSAGE(swept.count("wrong payload") == 0, describe(swept));
}

}  // namespace

TEST_CASE("redis cluster: the store's hash slot is the server's CLUSTER KEYSLOT, hash tags included") {
    test::redis_client raw(shared_cluster().nodes().front());
    std::mt19937 random(7);
    const std::string alphabet("ab{}\0\xff:|", 8);
    for (int i = 0; i < 500; ++i) {
        std::string key(random() % 12, 'x');
        for (auto& c : key) c = alphabet[random() % alphabet.size()];
        CHECK_MESSAGE(raw.text({"CLUSTER", "KEYSLOT", key}) == std::to_string(hash_slot(key)), key);
    }
    const std::string storage_key = record_key("orders{42}", scope::tenant("acme"), "capture").to_storage_key();
    CHECK(raw.text({"CLUSTER", "KEYSLOT", storage_key}) == std::to_string(hash_slot("42")));
}

TEST_CASE("redis cluster: each key is on the master owning its slot; a hash tag co-locates keys; the docs example") {
    const std::string source = read(IDEM_SOURCE_ROOT "/tests/redis/redis_cluster_test.cpp");
    const auto begin = source.find('\n', source.find("// readme:begin redis-cluster")) + 1;
    const auto end = source.find("// readme:end redis-cluster");
    REQUIRE(end != std::string::npos);
    CHECK_MESSAGE(read(IDEM_SOURCE_ROOT "/docs/redis.md").find(source.substr(begin, end - begin)) != std::string::npos,
                  "docs/redis.md does not show this file's redis-cluster example");

    auto& cluster = shared_cluster();
    // The first node named is not there: the next one answers.
    const auto store_ptr =
        make_cluster_store({{"127.0.0.1", test::free_loopback_port()}, {"127.0.0.1", cluster.nodes()[3].port}});
    redis_store& store = *store_ptr;

    const auto shards = cluster.shards(cluster.nodes().front());
    const auto master_of = [&](const std::string& storage_key) {
        const int slot = hash_slot(storage_key);
        for (const auto& s : shards)
            if (s.first_slot <= slot && slot <= s.last_slot) return s.master;
        FAIL("no master for slot " << slot);
        return test::redis_endpoint{};
    };
    const std::string spread = fresh_namespace();
    std::map<int, int> keys_per_master;
    for (int i = 0; i < 300; ++i) {
        const record_key key(spread, "k" + std::to_string(i));
        const auto r = store.try_reserve(key, "fp", 1min);
        REQUIRE(r.status == status::reserved);
        REQUIRE(store.complete(key, r.token, "fp", "done", 1min));
        CHECK(store.try_reserve(key, "fp", 1min).payload == "done");
        const auto master = master_of(key.to_storage_key());
        test::redis_client raw(master);
        CHECK(raw.text({"HGET", key.to_storage_key(), "p"}) == "done");
        ++keys_per_master[master.port];
    }
    CHECK(keys_per_master.size() == 3);
    for (const auto& [port, n] : keys_per_master) CHECK(n > 50);

    // Keys whose namespace carries the tag {customer_id} share its slot, so one master holds them all.
    const std::string customer = "customer-" + fresh_namespace();
    std::set<int> slots;
    for (int i = 0; i < 50; ++i) {
        const record_key key = customer_key(customer, "request-" + std::to_string(i));
        REQUIRE(store.try_reserve(key, "fp", 1min).status == status::reserved);
        slots.insert(hash_slot(key.to_storage_key()));
        test::redis_client raw(master_of(key.to_storage_key()));
        CHECK(raw.text({"EXISTS", key.to_storage_key()}) == "1");
    }
    CHECK(slots == std::set<int>{hash_slot(customer)});

    // Without cluster set, a node answers MOVED for most keys: unsupported, as before.
    auto standalone = cluster_options(cluster);
    standalone.cluster = false;
    redis_store single(standalone);
    int unsupported = 0;
    for (int i = 0; i < 20; ++i) {
        try {
            (void)single.try_reserve(record_key(spread, "single-" + std::to_string(i)), "fp", 1min);
        } catch (const store_error& e) {
            CHECK(e.failure() == store_failure::unsupported);
            CHECK(e.native_code() == "MOVED");
            ++unsupported;
        }
    }
    CHECK(unsupported > 5);
}

TEST_CASE("redis cluster: 4 processes x 16 threads race on 2000 keys over every master: one reserved per key") {
    auto& cluster = shared_cluster();
    const std::string name_space = fresh_namespace();
    constexpr int processes = 4;
    constexpr int threads = 16;
    constexpr int keys = 2000;
    std::vector<std::unique_ptr<test::child_process>> workers;
    for (int p = 0; p < processes; ++p) {
        test::spawn_options spawn;
        spawn.argv = {IDEM_REDIS_WORKER,   "spread",
                      "127.0.0.1",         std::to_string(cluster.nodes()[p].port),
                      name_space,          std::to_string(threads),
                      std::to_string(keys)};
        spawn.pipe_stdin = true;
        spawn.pipe_stdout = true;
        workers.push_back(std::make_unique<test::child_process>(std::move(spawn)));
    }
    for (auto& w : workers) REQUIRE(w->read_line(20s) == "ready");
    const auto started = clock_type::now();
    for (auto& w : workers) w->write("go\n");

    std::vector<int> winners(keys);
    int errors = 0;
    for (auto& w : workers) {
        const auto error_line = w->read_line(50s);
        REQUIRE(error_line.has_value());
        REQUIRE(error_line->starts_with("errors "));
        errors += std::stoi(error_line->substr(7));
        const auto reserved_line = w->read_line(5s);
        REQUIRE(reserved_line.has_value());
        std::istringstream fields(*reserved_line);
        std::string word;
        fields >> word;
        REQUIRE(word == "reserved");
        for (int k = 0; fields >> k;) ++winners.at(static_cast<std::size_t>(k));
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started);
    for (auto& w : workers) {
        w->close_stdin();
        const int exit_status = w->reap();
        CHECK(WIFEXITED(exit_status));
        CHECK(WEXITSTATUS(exit_status) == 0);
    }
    CHECK(errors == 0);
    int exactly_one = 0;
    std::set<int> slots;
    std::map<int, int> per_master;
    const auto shards = cluster.shards(cluster.nodes().front());
    for (int k = 0; k < keys; ++k) {
        CHECK_MESSAGE(winners[static_cast<std::size_t>(k)] == 1, "key " << k);
        exactly_one += winners[static_cast<std::size_t>(k)] == 1 ? 1 : 0;
        const int slot = hash_slot(record_key(name_space, "spread-" + std::to_string(k)).to_storage_key());
        slots.insert(slot);
        for (const auto& s : shards)
            if (s.first_slot <= slot && slot <= s.last_slot) ++per_master[s.master.port];
    }
    CHECK(per_master.size() == 3);
    std::string spread;
    for (const auto& [port, n] : per_master) spread += " " + std::to_string(n);
    MESSAGE(processes << " processes x " << threads << " threads, " << keys << " keys on " << slots.size()
                      << " slots (per master:" << spread << "), " << processes * threads * keys << " reserves in "
                      << elapsed.count() << " ms: exactly one reserved for " << exactly_one << " keys");
}

TEST_CASE("redis cluster: a slot migrated under traffic: no duplicate owner, typed errors only, service resumes") {
    test::redis_cluster cluster;
    const std::string tag = "moving-slot";
    const int slot = hash_slot(tag);
    const auto source = cluster.shard_of(slot).master;
    test::redis_endpoint target;
    for (const auto& s : cluster.shards(source))
        if (s.master.port != source.port) target = s.master;

    auto options = cluster_options(cluster);
    redis_store store(options);
    store.ping();
    const long long asking_before = calls(target, "asking");
    traffic t(store, {"orders{" + tag + "}", fresh_namespace()}, 12);
    std::this_thread::sleep_for(1s);  // keys in the slot before it moves

    const auto began = clock_type::now();
    const int migrated = cluster.migrate_slot(slot, source, target, 20, [] { std::this_thread::sleep_for(20ms); });
    const auto settled = clock_type::now();
    const long long slot_keys_when_settled = keys_in_slot(target, slot);
    std::this_thread::sleep_for(1s);
    t.stop();

    CHECK(migrated > 100);
    CHECK(cluster.shard_of(slot).master.port == target.port);
    CHECK(keys_in_slot(source, slot) == 0);
    CHECK(slot_keys_when_settled >= migrated);
    // New keys of the slot went to the target while it moved (ASK followed), and after (MOVED followed).
    const long long asking = calls(target, "asking") - asking_before;
    CHECK(asking > 0);
    CHECK(errors_sent(source, "MOVED") > 0);
    CHECK(keys_in_slot(target, slot) > slot_keys_when_settled);
    check_no_duplicate_and_resumed(t, settled);
    const auto during = t.errors_since(began);
    MESSAGE("slot " << slot << ": " << migrated << " keys migrated in "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(settled - began).count() << " ms under "
                    << t.keys() << " keys of traffic (" << traffic::contenders << " calls each); ASKING x" << asking
                    << " on the target; errors while it moved: " << describe(during) << "\n"
                    << t.first_errors());
}

TEST_CASE("redis cluster: a master failed over under traffic: no duplicate owner, typed errors only, service resumes") {
    test::redis_cluster cluster;
    const std::string tag = "failing-over";
    const int slot = hash_slot(tag);
    const auto before = cluster.shard_of(slot);
    REQUIRE(before.replicas.size() == 1);

    auto options = cluster_options(cluster);
    redis_store store(options);
    store.ping();
    traffic t(store, {"orders{" + tag + "}", fresh_namespace()}, 12);
    std::this_thread::sleep_for(1s);

    const auto began = clock_type::now();
    cluster.fail_over(before.replicas.front());
    const auto settled = clock_type::now();
    const long long slot_keys_when_settled = keys_in_slot(before.replicas.front(), slot);
    std::this_thread::sleep_for(1s);
    t.stop();

    const auto after = cluster.shard_of(slot);
    CHECK(after.master.port == before.replicas.front().port);
    REQUIRE(after.replicas.size() == 1);
    CHECK(after.replicas.front().port == before.master.port);
    // The demoted master redirected the store, which then kept adding keys on the new one.
    const long long moved = errors_sent(before.master, "MOVED");
    CHECK(moved > 0);
    CHECK(keys_in_slot(after.master, slot) > slot_keys_when_settled);
    check_no_duplicate_and_resumed(t, settled);
    MESSAGE("master :" << before.master.port << " failed over to :" << after.master.port << " in "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(settled - began).count() << " ms under "
                       << t.keys() << " keys of traffic; MOVED x" << moved
                       << " from the old master; errors meanwhile: " << describe(t.errors_since(began)) << "\n"
                       << t.first_errors());
}

TEST_CASE("redis cluster: CLUSTERDOWN is retried with backoff within command_timeout, then a transient error") {
    auto& cluster = shared_cluster();
    const std::string tag = "down-" + fresh_namespace();
    const int slot = hash_slot(tag);
    const auto master = cluster.shard_of(slot).master;
    auto options = cluster_options(cluster);
    options.command_timeout = 3s;
    redis_store store(options);
    store.ping();
    const std::string name_space = "orders{" + tag + "}";
    REQUIRE(store.try_reserve(record_key(name_space, "before"), "fp", 1min).status == status::reserved);

    // The master stops claiming the slot: with full coverage required it answers CLUSTERDOWN to everything.
    test::redis_client raw(master);
    REQUIRE(raw.text({"CLUSTER", "DELSLOTS", std::to_string(slot)}) == "OK");
    const auto wait_for_down = [&] {
        while (raw.text({"CLUSTER", "INFO"}).find("cluster_state:fail") == std::string::npos)
            std::this_thread::sleep_for(10ms);
    };
    wait_for_down();
    const long long down_before = errors_sent(master, "CLUSTERDOWN");
    std::jthread restore([&] {
        std::this_thread::sleep_for(500ms);
        test::redis_client admin(master);
        (void)admin.text({"CLUSTER", "ADDSLOTS", std::to_string(slot)});
    });
    const auto started = clock_type::now();
    CHECK(store.try_reserve(record_key(name_space, "while-down"), "fp", 1min).status == status::reserved);
    const auto waited = clock_type::now() - started;
    restore.join();
    const long long retried = errors_sent(master, "CLUSTERDOWN") - down_before;
    CHECK(waited >= 400ms);
    CHECK(retried >= 2);

    // Down for longer than the call's budget: a transient store_error naming CLUSTERDOWN.
    cluster.wait_until_settled();
    auto short_budget = options;
    short_budget.command_timeout = 300ms;
    redis_store impatient(short_budget);
    impatient.ping();
    REQUIRE(raw.text({"CLUSTER", "DELSLOTS", std::to_string(slot)}) == "OK");
    wait_for_down();
    const auto gave_up_at = clock_type::now();
    const auto e =
        caught_store_error([&] { (void)impatient.try_reserve(record_key(name_space, "given-up"), "fp", 1min); });
    const auto gave_up_after = clock_type::now() - gave_up_at;
    CHECK(e.is_transient());
    CHECK(e.failure() == store_failure::timeout);
    CHECK(e.native_code() == "CLUSTERDOWN");
    CHECK(gave_up_after >= 300ms);
    CHECK(gave_up_after < 1s);
    REQUIRE(raw.text({"CLUSTER", "ADDSLOTS", std::to_string(slot)}) == "OK");
    cluster.wait_until_settled();
    CHECK(impatient.try_reserve(record_key(name_space, "given-up"), "fp", 1min).status == status::reserved);
    CHECK(store.try_reserve(record_key(name_space, "before"), "fp", 1min).status == status::in_flight);
    MESSAGE("down for " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                        << " ms: the call waited and succeeded after " << retried << " CLUSTERDOWN replies; with a "
                        << "300 ms budget it gave up after "
                        << std::chrono::duration_cast<std::chrono::milliseconds>(gave_up_after).count()
                        << " ms: " << std::string(e.what()));
}

TEST_CASE("redis cluster: its nodes run as the unprivileged user; a SIGKILLed test leaves no node and no folder") {
    test::spawn_options spawn;
    spawn.argv = {IDEM_REDIS_WORKER, "hold-cluster"};
    spawn.pipe_stdin = true;
    spawn.pipe_stdout = true;
    test::child_process holder(std::move(spawn));
    std::vector<std::pair<pid_t, std::string>> nodes;
    for (int i = 0; i < 6; ++i) {
        const auto line = holder.read_line(60s);
        REQUIRE(line.has_value());
        std::istringstream fields(*line);
        int port = 0;
        pid_t pid = 0;
        std::string dir;
        fields >> port >> pid >> dir;
        REQUIRE(std::filesystem::is_regular_file(std::filesystem::path(dir) / "nodes.conf"));
        CHECK(test::redis_client(test::redis_endpoint{"127.0.0.1", port})
                  .text({"CLUSTER", "INFO"})
                  .find("cluster_state:ok") != std::string::npos);
        struct stat process {};
        REQUIRE(stat(("/proc/" + std::to_string(pid)).c_str(), &process) == 0);
        CHECK(process.st_uid == test::server_user::get().uid);
        nodes.emplace_back(pid, dir);
    }

    holder.signal(SIGKILL);
    holder.reap();
    const auto all_gone = [&] {
        return std::all_of(nodes.begin(), nodes.end(), [](const auto& node) {
            return test::process_gone(node.first) && !std::filesystem::exists(node.second);
        });
    };
    const auto deadline = clock_type::now() + 5s;
    while (!all_gone() && clock_type::now() < deadline) std::this_thread::sleep_for(10ms);
    for (const auto& [pid, dir] : nodes) {
        CHECK(test::process_gone(pid));
        CHECK_FALSE(std::filesystem::exists(dir));
    }
}

TEST_CASE("redis cluster: a master SIGKILLed under traffic: typed errors until its replica takes over, then service") {
    test::redis_cluster cluster;
    const std::string tag = "killed";
    const int slot = hash_slot(tag);
    const auto before = cluster.shard_of(slot);
    std::size_t killed = 0;
    while (cluster.nodes()[killed].port != before.master.port) ++killed;

    auto options = cluster_options(cluster);
    redis_store store(options);
    store.ping();
    traffic t(store, {"orders{" + tag + "}", fresh_namespace()}, 12);
    std::this_thread::sleep_for(1s);
    // Replication is asynchronous: only keys reserved well before the kill must have reached the replica.
    const int replicated = t.keys();
    std::this_thread::sleep_for(1s);

    const auto began = clock_type::now();
    cluster.server(killed).process().signal(SIGKILL);
    test::redis_client replica(before.replicas.front());
    while (replica.text({"INFO", "replication"}).find("role:master") == std::string::npos &&
           clock_type::now() < began + 30s)
        std::this_thread::sleep_for(20ms);
    const auto promoted = clock_type::now();
    cluster.server(killed).stop();
    cluster.server(killed).start();  // back with its nodes.conf: it rejoins as the new master's replica
    cluster.wait_until_settled();
    const auto settled = clock_type::now();
    std::this_thread::sleep_for(1s);
    t.stop();

    const auto after = cluster.shard_of(slot);
    CHECK(after.master.port == before.replicas.front().port);
    CHECK(t.untyped_errors() == 0);
    CHECK(t.wrong_payloads() == 0);
    CHECK(t.duplicates(replicated) == 0);
    CHECK_MESSAGE(t.errors_since(settled).empty(), describe(t.errors_since(settled)));
    CHECK(t.reserved_since(settled) > 100);
    const auto swept = t.sweep(replicated);
    CHECK_MESSAGE(swept.count("reserved again") == 0, describe(swept));
    const auto during = t.errors_since(began);
    CHECK_FALSE(during.empty());  // calls to its slots did fail while it was gone
    MESSAGE("master :" << before.master.port << " killed; replica promoted after "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(promoted - began).count()
                       << " ms; settled after "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(settled - began).count() << " ms, "
                       << t.keys() << " keys of traffic; errors meanwhile: " << describe(during)
                       << "; keys won twice: " << t.duplicates()
                       << " (of them reserved over 1 s before the kill: " << t.duplicates(replicated) << ")\n"
                       << t.first_errors());
}
