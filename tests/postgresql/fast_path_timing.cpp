// How much idem costs a PostgreSQL transfer, on one connection, measured in
// alternating rounds in one process (a measuring tool, not a test):
//
//   postgresql_fast_path_timing [--seconds S] [--rounds N]   (a throwaway server, or IDEM_TEST_POSTGRES)
//
// Besides the rate it reports the CPU time each transfer costs the client and
// its server process (from /proc; the server must run on this machine), which
// holds when other work competes for the CPUs and the rates do not.
//
// bare:   BEGIN; UPDATE; UPDATE; INSERT; COMMIT                      (5 round trips)
// fast:   execute_in_transaction: BEGIN+reserve, the same 3, complete+COMMIT   (5)
// plain:  runner.run + executor.execute(tx): BEGIN, reserve, 3, complete, COMMIT (7)
#include <soci/soci.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "idem/execute_in_transaction.hpp"
#include "idem/postgresql_store.hpp"
#include "postgres_server.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

// CPU seconds this process has used.
double own_cpu() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// CPU seconds process `pid` has used (utime + stime in /proc/<pid>/stat).
double cpu_of(int pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string skip;
    for (int i = 0; i < 11; ++i) fields >> skip;  // state ... cmajflt: fields 3 to 13
    double utime = 0, stime = 0;
    fields >> utime >> stime;
    return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct sample {
    double per_second;
    double cpu_micros;     // client and server process, per transfer
    double client_micros;  // of which the client
};

// Transfers per second of `op` for `span`, and what each cost in CPU.
sample measure(const std::function<void()>& op, std::chrono::milliseconds span, int backend) {
    const double client_before = own_cpu();
    const double cpu_before = client_before + cpu_of(backend);
    const auto start = clock_type::now();
    long n = 0;
    while (clock_type::now() - start < span) {
        for (int i = 0; i < 8; ++i) op();
        n += 8;
    }
    const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    const double client = own_cpu();
    const double cpu = client + cpu_of(backend) - cpu_before;
    return {static_cast<double>(n) / seconds, cpu * 1e6 / static_cast<double>(n),
            (client - client_before) * 1e6 / static_cast<double>(n)};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::chrono::milliseconds span{1000};
    int rounds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--seconds") span = std::chrono::milliseconds(static_cast<long>(std::stod(argv[i + 1]) * 1000));
        else if (flag == "--rounds") rounds = std::stoi(argv[i + 1]);
    }
    const std::string conninfo = idem::test::shared_postgres();
    auto store = std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = conninfo});
    idem::executor exec{store};
    idem::string_codec codec;
    soci::session session;
    idem::open_postgresql_session(session, conninfo);
    session << "SET client_min_messages = warning";
    session << "DROP TABLE IF EXISTS timing_ledger, timing_accounts";
    session << "CREATE TABLE timing_accounts (id text PRIMARY KEY, balance bigint NOT NULL)";
    session << "CREATE TABLE timing_ledger (transfer_id bigint PRIMARY KEY, amount bigint NOT NULL)";
    session << "INSERT INTO timing_accounts VALUES ('alice', 1000000000000), ('bob', 0)";
    idem::transaction_runner runner{session};
    int backend = 0;
    session << "SELECT pg_backend_pid()", soci::into(backend);

    // The business work as prepared statements, one round trip each.
    long long amount = 1;
    long long id = 0;
    soci::statement debit = (session.prepare << "UPDATE timing_accounts SET balance = balance - :a WHERE id = 'alice'",
                             soci::use(amount));
    soci::statement credit = (session.prepare << "UPDATE timing_accounts SET balance = balance + :a WHERE id = 'bob'",
                              soci::use(amount));
    soci::statement ledger = (session.prepare << "INSERT INTO timing_ledger (transfer_id, amount) VALUES (:t, :a)",
                              soci::use(id), soci::use(amount));
    auto transfer = [&] {
        debit.execute(true);
        credit.execute(true);
        ledger.execute(true);
    };
    auto key = [&] { return idem::record_key("timing", "t-" + std::to_string(id)); };

    const std::array<std::pair<const char*, std::function<void()>>, 3> ways{{
        {"bare", [&] {
             ++id;
             runner.run([&](idem::transaction&) { transfer(); });
         }},
        {"fast", [&] {
             ++id;
             (void)idem::execute_in_transaction(exec, runner, key(), "fp", {}, [&](idem::transaction&) {
                 transfer();
                 return std::string("ok");
             }, codec);
         }},
        {"plain", [&] {
             ++id;
             runner.run([&](idem::transaction& tx) {
                 (void)exec.execute(tx, key(), "fp", {}, [&] {
                     transfer();
                     return std::string("ok");
                 }, codec);
             });
         }},
    }};
    for (const auto& w : ways) (void)measure(w.second, std::chrono::milliseconds(200), backend);  // warm up

    std::array<std::vector<double>, 3> rates;
    std::array<std::vector<double>, 3> cpu;
    std::array<std::vector<double>, 3> client_cpu;
    for (int r = 0; r < rounds; ++r)
        for (std::size_t n = 0; n < ways.size(); ++n) {
            const std::size_t w = (n + static_cast<std::size_t>(r)) % ways.size();  // rotate who goes first
            const sample s = measure(ways[w].second, span, backend);
            rates[w].push_back(s.per_second);
            cpu[w].push_back(s.cpu_micros);
            client_cpu[w].push_back(s.client_micros);
        }
    const double bare = median(rates[0]);
    const double bare_cpu = median(cpu[0]);
    std::printf("one connection, %d rounds of %.1f s, medians (load average now: %s):\n", rounds,
                std::chrono::duration<double>(span).count(), [] {
                    static std::string load;
                    std::ifstream("/proc/loadavg") >> load;
                    return load.c_str();
                }());
    for (std::size_t w = 0; w < ways.size(); ++w)
        std::printf("  %-5s %8.0f transfers/s  %.3f of bare | CPU %6.1f us/transfer (client %5.1f)  bare/this %.3f\n",
                    ways[w].first, median(rates[w]), median(rates[w]) / bare, median(cpu[w]), median(client_cpu[w]),
                    bare_cpu / median(cpu[w]));
    return 0;
}
