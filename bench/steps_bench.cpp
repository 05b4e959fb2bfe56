// Operations in steps on one database, in one run:
// - cost: a three-step operation (a step, a call to an HTTP stub on loopback,
//   a step) through idem::operation against the same work written as two
//   plain transactions around the call with no idempotency, one client,
//   alternating rounds: operations/s and their ratio;
// - takeover: a worker process begins the operation and SIGKILLs itself inside
//   the call; a completer (passes 5 ms apart) finishes it. The time from the
//   lease's end to the completed operation, and from the kill to it.
//   idem-steps-bench URL [--rounds N] [--seconds S] [--kills N] [--lease MS]
//   idem-steps-bench URL --die-in-call KEY LEASE_MS STUB_PORT   (the worker)
#include <httplib.h>
#include <soci/soci.h>
#include <spawn.h>
#include <sys/wait.h>
#include <idem/completer.hpp>
#include <idem/database.hpp>
#include <idem/operation.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
constexpr int accounts = 10000;

// The provider's stand-in: answers every charge at once, on a thread of its own.
struct stub {
    httplib::Server server;
    std::thread thread;
    int port = 0;
    stub() {
        server.Post("/charge", [](const httplib::Request& req, httplib::Response& res) {
            res.set_content(R"({"id":"ch_)" + req.get_header_value("Idempotency-Key").substr(0, 8) + "\"}",
                            "application/json");
        });
        server.set_tcp_nodelay(true);  // else each answer waits for the client's delayed ACK
        port = server.bind_to_any_port("127.0.0.1");
        thread = std::thread([this] { server.listen_after_bind(); });
        while (!server.is_running()) std::this_thread::sleep_for(1ms);
    }
    ~stub() {
        server.stop();
        thread.join();
    }
};

std::string charge(httplib::Client& client, const std::string& key) {
    const auto r = client.Post("/charge", {{"Idempotency-Key", key}}, "{}", "application/json");
    if (!r || r->status != 200) throw std::runtime_error("the stub did not answer");
    return r->body;
}

// The work: hold one unit of an account, charge, credit another account.
void hold(idem::unit_of_work& uow, long long from, const std::string& id) {
    uow.sql() << "UPDATE bench_accounts SET balance = balance - 1 WHERE id = :f", soci::use(from);
    uow.sql() << "INSERT INTO bench_holds (id, account, state) VALUES (:id, :f, 0)", soci::use(id), soci::use(from);
}
void settle(idem::unit_of_work& uow, long long to, const std::string& id) {
    uow.sql() << "UPDATE bench_accounts SET balance = balance + 1 WHERE id = :t", soci::use(to);
    uow.sql() << "UPDATE bench_holds SET state = 1 WHERE id = :id", soci::use(id);
}

std::pair<long long, long long> accounts_of(std::uint64_t n) {
    const long long from = static_cast<long long>(n % accounts);
    return {from, (from + 1 + static_cast<long long>(n % 97)) % accounts};
}

// The operation: its input names the accounts; `at_call` runs inside the call.
idem::operation<std::string> payment(httplib::Client& client, std::function<void()> at_call = nullptr) {
    return {"bench.payment", [&client, at_call](idem::steps& op) {
                const auto space = op.input().find(' ');
                const long long from = std::stoll(op.input().substr(0, space)),
                                to = std::stoll(op.input().substr(space + 1));
                const std::string id = op.call_key("hold");
                op.step("hold", [&](idem::unit_of_work& uow) { return (hold(uow, from, id), 0); });
                std::string charged = op.call("charge", [&](const std::string& key) {
                    if (at_call) at_call();
                    return charge(client, key);
                });
                op.step("settle", [&](idem::unit_of_work& uow) { return (settle(uow, to, id), 0); });
                return charged;
            }};
}

std::string input_of(long long from, long long to) {
    return std::to_string(from) + " " + std::to_string(to);
}

void prepare(idem::database& db) {
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS bench_holds (id TEXT PRIMARY KEY, account BIGINT NOT NULL, state "
                     "INTEGER NOT NULL)";
        long long n = 0;
        uow.sql() << "SELECT COUNT(*) FROM bench_accounts", soci::into(n);
        for (long long i = n; i < accounts; ++i)
            uow.sql() << "INSERT INTO bench_accounts (id, balance) VALUES (:i, 1000000)", soci::use(i);
    });
}

// The worker: begins operation KEY and dies inside its call, after printing the
// call's start (system clock, ns since the epoch): the lease runs from there.
int die_in_call(const std::string& url, const std::string& key, long long lease_ms, int port) {
    idem::database db = idem::database::open(url);
    httplib::Client client("127.0.0.1", port);
    const auto op = payment(client, [] {
        std::printf("%lld\n", static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                         std::chrono::system_clock::now().time_since_epoch())
                                                         .count()));
        std::fflush(stdout);
        std::raise(SIGKILL);
    });
    (void)op.run(db, {"bench.payment", key}, "fp", input_of(1, 2), {.lease = std::chrono::milliseconds(lease_ms)});
    return 1;  // never: it dies in the call
}

// Spawns the worker for `key`; returns when it died, with the time its call began.
std::chrono::system_clock::time_point killed_in_call(const char* self, const std::string& url, const std::string& key,
                                                     long long lease_ms, int port) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    const std::string lease = std::to_string(lease_ms), stub_port = std::to_string(port);
    std::vector<char*> argv{const_cast<char*>(self),
                            const_cast<char*>(url.c_str()),
                            const_cast<char*>("--die-in-call"),
                            const_cast<char*>(key.c_str()),
                            const_cast<char*>(lease.c_str()),
                            const_cast<char*>(stub_port.c_str()),
                            nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, self, &actions, nullptr, argv.data(), environ) != 0) throw std::runtime_error("spawn");
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    std::string line;
    char c = 0;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (line.empty()) throw std::runtime_error("the worker did not reach its call");
    return std::chrono::system_clock::time_point(std::chrono::nanoseconds(std::stoll(line)));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 6 && std::string(argv[2]) == "--die-in-call")
        return die_in_call(argv[1], argv[3], std::stoll(argv[4]), std::stoi(argv[5]));
    if (argc < 2) {
        std::cerr << "usage: idem-steps-bench URL [--rounds N] [--seconds S] [--kills N] [--lease MS]\n";
        return 2;
    }
    int rounds = 5, kills = 10;
    double seconds = 1;
    long long lease_ms = 500;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--rounds") rounds = std::stoi(argv[i + 1]);
        if (flag == "--seconds") seconds = std::stod(argv[i + 1]);
        if (flag == "--kills") kills = std::stoi(argv[i + 1]);
        if (flag == "--lease") lease_ms = std::stoll(argv[i + 1]);
    }
    idem::database db = idem::database::open(argv[1], {.pool_size = 8});
    prepare(db);
    stub provider;
    httplib::Client client("127.0.0.1", provider.port);
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);
    const auto op = payment(client);
    static std::atomic<std::uint64_t> serial{0};
    const std::string run_id = std::to_string(std::random_device{}());

    const auto span = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    const idem::bench::paired cost = idem::bench::compare(
        [&] {
            return idem::bench::measure(
                [&](std::uint64_t n) {
                    const auto [from, to] = accounts_of(n);
                    auto e = op.run(db, {"bench.payment", run_id + "-" + std::to_string(serial++)}, "fp",
                                    input_of(from, to));
                    if (e.status() != idem::execution_status::executed) throw std::logic_error("not executed");
                },
                span);
        },
        [&] {
            return idem::bench::measure(
                [&](std::uint64_t n) {
                    const auto [from, to] = accounts_of(n);
                    const std::string id = run_id + "-bare-" + std::to_string(serial++);
                    db.transact([&](idem::unit_of_work& uow) { hold(uow, from, id); });
                    (void)charge(client, id);
                    db.transact([&](idem::unit_of_work& uow) { settle(uow, to, id); });
                },
                span);
        },
        rounds);
    std::cout << "steps: step, call, step through idem::operation " << static_cast<long long>(cost.subject.per_second)
              << "/s; two plain transactions around the call " << static_cast<long long>(cost.baseline.per_second)
              << "/s; ratio " << cost.subject.per_second / cost.baseline.per_second << '\n';

    // Takeover after a kill inside the call.
    idem::completer completer(db, {op}, {.idle_wait = 5ms, .report_every = 0ms});
    completer.start();
    std::vector<double> after_lease, after_kill;
    for (int k = 0; k < kills; ++k) {
        const std::string key = run_id + "-killed-" + std::to_string(k);
        const auto call_began = killed_in_call(argv[0], argv[1], key, lease_ms, provider.port);
        const auto killed = std::chrono::system_clock::now();
        for (;;) {
            auto s = idem::inspect_operation(db, {"bench.payment", key});
            if (s && s->phase == idem::operation_phase::completed) break;
            std::this_thread::sleep_for(1ms);
        }
        const auto done = std::chrono::system_clock::now();
        after_lease.push_back(
            std::chrono::duration<double, std::milli>(done - (call_began + std::chrono::milliseconds(lease_ms)))
                .count());
        after_kill.push_back(std::chrono::duration<double, std::milli>(done - killed).count());
    }
    completer.stop();
    std::sort(after_lease.begin(), after_lease.end());
    std::cout << "takeover after a kill inside the call (lease " << lease_ms << " ms, completer passes 5 ms apart, "
              << kills << " kills): completed " << idem::bench::median(after_lease) << " ms after the lease ended (max "
              << after_lease.back() << " ms), " << idem::bench::median(after_kill) << " ms after the kill\n";
}
