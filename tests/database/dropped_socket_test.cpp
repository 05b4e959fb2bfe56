// A network cut between idem and PostgreSQL: every packet to and from the
// server dropped (an nftables rule), as when a link or a host's network goes
// while both ends stay up. Nothing answers and nothing says no, so only TCP's
// own bounds end the wait; idem sets them on every connection it opens
// (tcp_user_timeout 10 s for data sent and not acknowledged; keepalive probes
// from 5 s of silence, every 2 s, three unanswered: 11 s). This measures them.
//
// The test process runs in a network namespace of its own, made before main
// while it has one thread, with its own loopback: the rules it adds touch
// nothing outside it, and the server it starts (a child) lives in it too.
#include <doctest/doctest.h>

#include <net/if.h>
#include <sched.h>
#include <soci/soci.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "child_process.hpp"
#include "idem/database.hpp"
#include "postgres_server.hpp"

#ifndef IDEM_NFT
#define IDEM_NFT "/usr/sbin/nft"
#endif

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using idem::test::postgres_server;

// A network namespace and its loopback up; the reason it could not, or "".
std::string isolate() {
    if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return std::string("socket: ") + std::strerror(errno);
    ifreq request{};
    std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
    const bool up =
        ioctl(s, SIOCGIFFLAGS, &request) == 0 && (request.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &request) == 0);
    const std::string why = up ? "" : std::string("bringing lo up: ") + std::strerror(errno);
    close(s);
    return why;
}

// Before main: unshare moves only the calling thread, so there must be no other yet.
const std::string not_isolated = isolate();

// Runs nft with `script` (its commands on standard input); throws when it fails.
void nft(const std::string& script) {
    idem::test::spawn_options o;
    o.argv = {IDEM_NFT, "-f", "-"};
    o.pipe_stdin = true;
    o.pipe_stdout = true;
    idem::test::child_process run(std::move(o));
    run.write(script);
    run.close_stdin();
    if (!run.wait_for_exit(10s)) throw std::runtime_error("nft did not finish");
    const int status = run.reap();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("nft failed on:\n" + script);
}

// Every packet to or from `port` on the loopback dropped while it lives.
class network_cut {
public:
    explicit network_cut(int port) {
        const std::string p = std::to_string(port);
        nft("table inet idem_cut {\n  chain in {\n    type filter hook input priority 0;\n    tcp dport " + p +
            " drop\n    tcp sport " + p + " drop\n  }\n}\n");
    }
    ~network_cut() {
        try {
            nft("delete table inet idem_cut\n");
        } catch (...) {
            // the namespace goes with the process
        }
    }
    network_cut(const network_cut&) = delete;
    network_cut& operator=(const network_cut&) = delete;
};

// This process's established connections to `port`, from /proc/net/tcp (the namespace's own).
int connections_to(int port) {
    std::ifstream table("/proc/net/tcp");
    std::string line;
    std::getline(table, line);  // the header
    int n = 0;
    while (std::getline(table, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state;
        fields >> slot >> local >> remote >> state;
        const int remote_port = std::stoi(remote.substr(remote.find(':') + 1), nullptr, 16);
        if (remote_port == port && state == "01") ++n;  // 01: ESTABLISHED
    }
    return n;
}

long long backend_pid(idem::unit_of_work& uow) {
    long long pid = 0;
    uow.sql() << "SELECT pg_backend_pid()", soci::into(pid);
    return pid;
}

}  // namespace

TEST_CASE(
    "PostgreSQL: a network cut ends a unit of work's statement after tcp_user_timeout, and an idle pooled "
    "connection after its keepalive probes") {
    REQUIRE_MESSAGE(not_isolated.empty(), "this test needs a network namespace of its own: " << not_isolated);
    postgres_server server;
    // answer_timeout off: TCP's bounds alone are measured.
    idem::database db = idem::database::open(server.conninfo(), {.pool_size = 1, .attempts = 1, .answer_timeout = 0ms});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) { uow.sql() << "CREATE TABLE moves (id BIGINT PRIMARY KEY)"; });

    SUBCASE("a statement sent into the cut: connection_lost once it goes unacknowledged for 10 s") {
        std::promise<void> began, cut_made;
        std::chrono::milliseconds took{0};
        auto pending = std::async(std::launch::async, [&] {
            db.transact([&](idem::unit_of_work& uow) {
                (void)backend_pid(uow);
                began.set_value();
                cut_made.get_future().wait();
                const auto sent = clock_type::now();
                try {
                    uow.sql() << "INSERT INTO moves VALUES (1)";
                } catch (...) {
                    took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - sent);
                    throw;
                }
            });
        });
        began.get_future().wait();
        std::optional<network_cut> cut(std::in_place, server.port());
        cut_made.set_value();
        const bool ended = pending.wait_for(40s) == std::future_status::ready;
        cut.reset();  // the network back, so that a call still waiting ends
        REQUIRE_MESSAGE(ended, "still waiting 40 s into the cut");
        MESSAGE("a statement sent into a network cut failed after " << took.count()
                                                                    << " ms (tcp_user_timeout 10,000 ms)");
        CHECK(took >= 9s);
        CHECK(took < 20s);
        try {
            pending.get();
            FAIL("a statement went through a network cut");
        } catch (const idem::error& e) {
            CHECK(e.is_connection_lost());
            CHECK(e.rolled_back());
        }
    }

    SUBCASE("an idle pooled connection: ended by its keepalive probes (11 s); the next unit of work opens a new one") {
        // Units of work rerun on a new connection, as by default.
        idem::database pooled = idem::database::open(server.conninfo(), {.pool_size = 1, .answer_timeout = 0ms});
        const long long before = pooled.transact([](idem::unit_of_work& uow) { return backend_pid(uow); });
        // Both databases' sessions and their record stores' connections, idle in their pools.
        const int idle = connections_to(server.port());
        REQUIRE(idle >= 2);
        std::chrono::milliseconds ended{0};
        {
            const network_cut cut(server.port());
            const auto cut_at = clock_type::now();
            while (connections_to(server.port()) > 0 && clock_type::now() - cut_at < 20s)
                std::this_thread::sleep_for(100ms);
            ended = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - cut_at);
        }
        MESSAGE(idle << " idle pooled connections in a network cut were all ended after " << ended.count()
                     << " ms (keepalives: 5 s idle, then 3 probes 2 s apart)");
        CHECK(connections_to(server.port()) == 0);
        CHECK(ended >= 10s);
        // The network is back: a pooled connection the probes had not ended would simply go on.
        const long long after = pooled.transact([](idem::unit_of_work& uow) { return backend_pid(uow); });
        CHECK(after != before);
    }
}
