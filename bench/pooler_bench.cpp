// once() through PgBouncer in transaction pooling against the same work without
// a record, and against PostgreSQL directly: transfers/s for one configuration.
//   idem-pooler-bench URL [--transaction-pooler] [--bare] [--clients N] [--seconds S]
// The accounts table is created by the caller (bench/pooler); prints the rate.
#include <soci/soci.h>
#include <idem/database.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: idem-pooler-bench URL [--transaction-pooler] [--bare] [--clients N] [--seconds S]\n";
        return 2;
    }
    bool pooler = false, bare = false;
    int clients = 8;
    double seconds = 2;
    for (int i = 2; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--transaction-pooler")
            pooler = true;
        else if (flag == "--bare")
            bare = true;
        else if (flag == "--clients" && i + 1 < argc)
            clients = std::stoi(argv[++i]);
        else if (flag == "--seconds" && i + 1 < argc)
            seconds = std::stod(argv[++i]);
    }
    idem::database db =
        idem::database::open(argv[1], {.pool_size = static_cast<std::size_t>(clients), .transaction_pooler = pooler});
    static std::atomic<std::uint64_t> next{0};
    const std::string run = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    const auto transfer = [](idem::unit_of_work& uow, std::uint64_t id) {
        // Two accounts, the lower id locked first, so that transfers never deadlock.
        const int a = static_cast<int>(id % 1000), b = static_cast<int>((id * 7 + 1) % 1000);
        const int first = std::min(a, b), second = std::max(a, b);
        uow.sql() << "UPDATE accounts SET balance = balance - 1 WHERE id = :a", soci::use(first);
        uow.sql() << "UPDATE accounts SET balance = balance + 1 WHERE id = :a", soci::use(second);
    };
    std::vector<double> rates(static_cast<std::size_t>(clients));
    std::barrier start(clients);
    {
        std::vector<std::jthread> threads;
        for (int c = 0; c < clients; ++c)
            threads.emplace_back([&, c] {
                start.arrive_and_wait();
                rates[static_cast<std::size_t>(c)] = idem::bench::measure(
                    [&](std::uint64_t) {
                        const std::uint64_t id = next++;
                        if (bare) {
                            db.transact([&](idem::unit_of_work& uow) { transfer(uow, id); });
                            return;
                        }
                        const idem::record_key key{"bench.pooler", idem::scope::global(),
                                                   run + "-" + std::to_string(id)};
                        (void)db.once(key, "fp", [&](idem::unit_of_work& uow) { transfer(uow, id); });
                    },
                    std::chrono::milliseconds(static_cast<long>(seconds * 1000)));
            });
    }
    double total = 0;
    for (double r : rates) total += r;
    std::cout << static_cast<long>(total) << "\n";
}
