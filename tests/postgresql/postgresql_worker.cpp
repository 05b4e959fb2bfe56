// A child process for the multi-process PostgreSQL tests.
//
//   postgresql_worker transfer <conninfo> <threads> <rounds>  race transfers at the instant "go <t>" on stdin names
//   postgresql_worker crash <conninfo> <key>                  write a transfer, print "written", wait to be killed
//   postgresql_worker migrate <conninfo>                      migrate at that instant; print what it applied
//   postgresql_worker purge <conninfo> <batch>                purge in batches from that instant; print the total
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "bank.hpp"
#include "idem/execute_in_transaction.hpp"
#include "idem/executor.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::pg_bank;

// "go <t>": start at t (system_clock nanoseconds since the epoch), the same
// instant in every worker, so that no process gets a head start.
void await_go() {
    std::string word;
    long long start = 0;
    if (!(std::cin >> word >> start) || word != "go") std::exit(3);
    std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::nanoseconds(start)));
}

// Every thread on a business connection of its own; half of them go through
// execute_in_transaction, half through the store's transaction calls.
int transfer(const std::string& conninfo, int threads, int rounds) {
    auto store = std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = conninfo});
    idem::executor exec{store};
    std::atomic<int> executed{0};
    std::atomic<int> replayed{0};
    std::atomic<int> other{0};
    std::atomic<int> errors{0};
    std::latch ready(threads + 1);
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            soci::session session;
            idem::open_postgresql_session(session, conninfo);
            idem::transaction_runner runner{session};
            ready.arrive_and_wait();
            for (int round = 0; round < rounds; ++round) {
                const std::string key = "transfer-" + std::to_string(round);
                try {
                    if (t % 2 == 0) {
                        switch (bank::transfer(*store, runner, key, 10)) {
                            case bank::outcome::executed: ++executed; break;
                            case bank::outcome::replayed: ++replayed; break;
                            default: ++other; break;
                        }
                    } else {
                        auto e = idem::execute_in_transaction(exec, runner, bank::transfer_key(key), bank::fingerprint,
                                                              {},
                                                              [&](idem::transaction& tx) {
                                                                  bank::move_money(tx.session(), key, 10);
                                                                  return std::string("moved 10");
                                                              },
                                                              idem::string_codec{});
                        if (e.status() == idem::execution_status::executed) ++executed;
                        else if (e.status() == idem::execution_status::replayed) ++replayed;
                        else ++other;
                    }
                } catch (const std::exception& e) {
                    ++errors;
                    std::cerr << "transfer failed: " << e.what() << "\n";
                }
            }
        });
    }
    await_go();
    ready.arrive_and_wait();
    pool.clear();
    std::cout << executed << " " << replayed << " " << other << " " << errors << std::endl;
    return 0;
}

int crash(const std::string& conninfo, const std::string& key) {
    auto store = std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = conninfo});
    idem::executor exec{store};
    soci::session session;
    idem::open_postgresql_session(session, conninfo);
    idem::transaction_runner runner{session};
    (void)idem::execute_in_transaction(exec, runner, bank::transfer_key(key), bank::fingerprint, {},
                                       [&](idem::transaction& tx) {
                                           bank::move_money(tx.session(), key, 10);
                                           std::cout << "written" << std::endl;
                                           for (;;) pause();  // killed here, between the writes and the commit
                                           return std::string();
                                       },
                                       idem::string_codec{});
    return 5;
}

int migrate(const std::string& conninfo) {
    idem::postgresql_store store({.connection = conninfo, .migrate_on_open = false});
    await_go();
    const auto applied = store.migrate();
    std::cout << applied.size();
    for (const auto& name : applied) std::cout << " " << name;
    std::cout << std::endl;
    return 0;
}

int purge(const std::string& conninfo, std::size_t batch) {
    idem::postgresql_store store({.connection = conninfo});
    await_go();
    std::size_t total = 0;
    while (std::size_t n = store.purge_batch(batch, 0s)) total += n;
    std::cout << total << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    try {
        if (args.size() == 4 && args[0] == "transfer") return transfer(args[1], std::stoi(args[2]), std::stoi(args[3]));
        if (args.size() == 3 && args[0] == "crash") return crash(args[1], args[2]);
        if (args.size() == 2 && args[0] == "migrate") return migrate(args[1]);
        if (args.size() == 3 && args[0] == "purge") return purge(args[1], std::stoul(args[2]));
    } catch (const std::exception& e) {
        std::cerr << "postgresql_worker: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "usage: postgresql_worker transfer <conninfo> <threads> <rounds> | crash <conninfo> <key> |"
                 " migrate <conninfo> | purge <conninfo> <batch>\n";
    return 2;
}
