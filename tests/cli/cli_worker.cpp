// Live traffic for the purge tests: a process that keeps reserving fresh keys
// on one SQLite file (completing every other one, leaving the rest in flight
// with a live lease) until told to stop.
//
//   cli_worker traffic <db> <prefix>      <db>: a SQLite file, or a postgresql:// URI
//     prints "ready" after its first record; then answers each line on stdin:
//     "count" -> records written so far; "stop" -> "<written> <errors>", exit
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli_support.hpp"
#include "idem/sqlite_store.hpp"
#if IDEM_CLI_POSTGRESQL
#include "idem/postgresql_store.hpp"
#endif

namespace {

using namespace std::chrono_literals;

// The default busy timeout (SQLite): a purge holding the write lock for long would show as errors.
std::unique_ptr<idem::record_store> open(const std::string& db) {
#if IDEM_CLI_POSTGRESQL
    if (db.starts_with("postgresql://"))
        return std::make_unique<idem::postgresql_store>(
            idem::postgresql_store_options{.connection = db, .pool_size = 1, .migrate_on_open = false});
#endif
    return std::make_unique<idem::sqlite_store>(idem::sqlite_store_options{.path = db, .migrate_on_open = false});
}

int traffic(const std::string& db, const std::string& prefix) {
    const auto owned = open(db);
    idem::record_store& store = *owned;
    std::atomic<bool> stop{false};
    std::atomic<int> written{0};
    std::atomic<int> errors{0};
    std::jthread writer([&] {
        for (int n = 0; !stop.load(); ++n) {
            const auto key = idem::test::cli::key_of(prefix, n);
            try {
                const auto r = store.try_reserve(key, "fp", 10min);
                if (r.status != idem::reservation_status::reserved) {
                    ++errors;
                } else if (n % 2 == 0 &&
                           !store.complete(key, r.token, "fp", idem::test::cli::payload_of(prefix, n), 1h)) {
                    ++errors;
                }
            } catch (const std::exception& e) {
                std::cerr << "cli_worker: " << e.what() << "\n";
                ++errors;
            }
            if (written.fetch_add(1) == 0) std::cout << "ready" << std::endl;
            // Busy traffic, not a lock hog: SQLite's waiting writers poll rather
            // than queue, so a process that takes the lock back the instant it
            // commits would starve the purge (which it would survive, slowly).
            std::this_thread::sleep_for(200us);
        }
    });
    for (std::string line; std::getline(std::cin, line);) {
        if (line == "count") std::cout << written.load() << std::endl;
        if (line == "stop") break;
    }
    stop = true;
    writer.join();
    std::cout << written.load() << " " << errors.load() << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 4 && std::string(argv[1]) == "traffic") return traffic(argv[2], argv[3]);
    } catch (const std::exception& e) {
        std::cerr << "cli_worker: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "usage: cli_worker traffic <db> <prefix>\n";
    return 2;
}
