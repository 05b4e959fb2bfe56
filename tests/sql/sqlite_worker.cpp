// A child process for the multi-process SQLite tests.
//
//   sqlite_worker transfer <db> <threads> <rounds>  race transfers at the instant "go <t>" on stdin names
//   sqlite_worker crash <db> <key>                  write a transfer, print "written", wait to be killed
//   sqlite_worker migrate <db>                      migrate at that instant; print what it applied
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "bank.hpp"

namespace {

using namespace std::chrono_literals;
namespace bank = idem::test::bank;

const idem::sqlite_connection_options connection_options{30s, idem::sqlite_synchronous::normal};

idem::sqlite_store open_store(const std::string& db, bool migrate_on_open = true) {
    idem::sqlite_store_options options;
    options.path = db;
    options.connection = connection_options;
    options.migrate_on_open = migrate_on_open;
    return idem::sqlite_store(options);
}

// "go <t>": start at t (system_clock nanoseconds since the epoch), the same
// instant in every worker, so that no process gets a head start.
void await_go() {
    std::string word;
    long long start = 0;
    if (!(std::cin >> word >> start) || word != "go") std::exit(3);
    std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::nanoseconds(start)));
}

int transfer(const std::string& db, int threads, int rounds) {
    idem::sqlite_store store = open_store(db);
    std::atomic<int> executed{0};
    std::atomic<int> replayed{0};
    std::atomic<int> other{0};
    std::atomic<int> errors{0};
    std::latch ready(threads + 1);
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            soci::session session;
            idem::open_sqlite_session(session, db, connection_options);
            idem::transaction_runner runner{session};
            ready.arrive_and_wait();
            for (int round = 0; round < rounds; ++round) {
                try {
                    switch (bank::transfer(store, runner, "transfer-" + std::to_string(round), 10)) {
                        case bank::outcome::executed: ++executed; break;
                        case bank::outcome::replayed: ++replayed; break;
                        default: ++other; break;
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

int crash(const std::string& db, const std::string& key) {
    idem::sqlite_store store = open_store(db);
    soci::session session;
    idem::open_sqlite_session(session, db, connection_options);
    idem::transaction_runner runner{session};
    runner.run([&](idem::transaction& tx) {
        auto r = store.try_reserve(tx, bank::transfer_key(key), bank::fingerprint, 1min);
        if (r.status != idem::reservation_status::reserved) std::exit(4);
        bank::move_money(tx.session(), key, 10);
        std::cout << "written" << std::endl;
        for (;;) pause();  // the parent kills us here, between the writes and the commit
    });
    return 5;
}

int migrate(const std::string& db) {
    idem::sqlite_store store = open_store(db, false);
    await_go();
    const auto applied = store.migrate();
    std::cout << applied.size();
    for (const auto& name : applied) std::cout << " " << name;
    std::cout << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    try {
        if (args.size() == 4 && args[0] == "transfer") return transfer(args[1], std::stoi(args[2]), std::stoi(args[3]));
        if (args.size() == 3 && args[0] == "crash") return crash(args[1], args[2]);
        if (args.size() == 2 && args[0] == "migrate") return migrate(args[1]);
    } catch (const std::exception& e) {
        std::cerr << "sqlite_worker: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "usage: sqlite_worker transfer <db> <threads> <rounds> | crash <db> <key> | migrate <db>\n";
    return 2;
}
