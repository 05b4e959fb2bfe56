// A separate process for the Redis tests that need more than one.
//
//   redis_worker race HOST PORT NAMESPACE THREADS
//       prints "ready", then for each line "R" on stdin races THREADS threads to
//       reserve key "race-R" and prints "R reserved in_flight errors".
//   redis_worker spread HOST PORT NAMESPACE THREADS KEYS
//       a Redis Cluster store: prints "ready", and on the line "go" THREADS threads each try
//       to reserve every key "spread-0" to "spread-(KEYS-1)", thread t starting at key
//       t * KEYS / THREADS; then prints "errors E" and "reserved I J ..." (the keys it won).
//   redis_worker hold-server
//       starts a throwaway redis-server, prints "PORT PID DIR" and waits to be killed.
//   redis_worker hold-cluster
//       starts a throwaway Redis Cluster, prints "PORT PID DIR" for each of its 6 nodes and waits.
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "idem/redis_store.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"

namespace {

int race(const std::string& host, int port, const std::string& name_space, int threads) {
    idem::redis_options options;
    options.host = host;
    options.port = port;
    options.pool_size = static_cast<std::size_t>(threads);
    idem::redis_store store(options);

    std::barrier go(threads + 1);
    std::barrier done(threads + 1);
    std::atomic<bool> stop{false};
    std::string round;
    std::atomic<int> reserved{0}, in_flight{0}, errors{0};
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            store.ping();  // connect before the first round, so rounds race on open connections
            for (;;) {
                go.arrive_and_wait();
                if (stop) return;
                try {
                    const auto r =
                        store.try_reserve(idem::record_key(name_space, "race-" + round), "fp", std::chrono::minutes(1));
                    if (r.status == idem::reservation_status::reserved) ++reserved;
                    if (r.status == idem::reservation_status::in_flight) ++in_flight;
                } catch (const std::exception& e) {
                    std::cerr << "redis_worker: " << e.what() << '\n';
                    ++errors;
                }
                done.arrive_and_wait();
            }
        });
    }
    std::cout << "ready" << std::endl;
    while (std::getline(std::cin, round)) {
        reserved = in_flight = errors = 0;
        go.arrive_and_wait();
        done.arrive_and_wait();
        std::cout << round << ' ' << reserved << ' ' << in_flight << ' ' << errors << std::endl;
    }
    stop = true;
    go.arrive_and_wait();
    return 0;
}

int spread(const std::string& host, int port, const std::string& name_space, int threads, int keys) {
    idem::redis_options options;
    options.host = host;
    options.port = port;
    options.cluster = true;
    options.pool_size = static_cast<std::size_t>(threads);
    idem::redis_store store(options);
    store.ping();

    std::vector<std::atomic<bool>> won(static_cast<std::size_t>(keys));
    std::atomic<int> errors{0};
    std::string line;
    std::cout << "ready" << std::endl;
    if (!std::getline(std::cin, line) || line != "go") return 1;
    {
        std::vector<std::jthread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                for (int i = 0; i < keys; ++i) {
                    const int k = (i + t * keys / threads) % keys;
                    try {
                        const auto r = store.try_reserve(idem::record_key(name_space, "spread-" + std::to_string(k)),
                                                         "fp", std::chrono::minutes(1));
                        if (r.status == idem::reservation_status::reserved &&
                            won[static_cast<std::size_t>(k)].exchange(true))
                            ++errors;  // this process won one key twice
                    } catch (const std::exception& e) {
                        std::cerr << "redis_worker: " << e.what() << '\n';
                        ++errors;
                    }
                }
            });
        }
    }
    std::cout << "errors " << errors << std::endl;
    std::cout << "reserved";
    for (int k = 0; k < keys; ++k)
        if (won[static_cast<std::size_t>(k)]) std::cout << ' ' << k;
    std::cout << std::endl;
    return 0;
}

int hold_server() {
    idem::test::redis_server server;
    std::cout << server.port() << ' ' << server.process().pid() << ' ' << server.process().dir().string() << std::endl;
    std::string ignored;
    while (std::getline(std::cin, ignored)) {
    }
    return 0;
}

int hold_cluster() {
    idem::test::redis_cluster cluster;
    for (std::size_t i = 0; i < cluster.nodes().size(); ++i) {
        auto& server = cluster.server(i);
        std::cout << server.port() << ' ' << server.process().pid() << ' ' << server.process().dir().string() << '\n';
    }
    std::cout << std::flush;
    std::string ignored;
    while (std::getline(std::cin, ignored)) {
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    try {
        if (args.size() == 5 && args[0] == "race")
            return race(args[1], std::stoi(args[2]), args[3], std::stoi(args[4]));
        if (args.size() == 6 && args[0] == "spread")
            return spread(args[1], std::stoi(args[2]), args[3], std::stoi(args[4]), std::stoi(args[5]));
        if (args.size() == 1 && args[0] == "hold-server") return hold_server();
        if (args.size() == 1 && args[0] == "hold-cluster") return hold_cluster();
    } catch (const std::exception& e) {
        std::cerr << "redis_worker: " << e.what() << '\n';
        return 1;
    }
    std::cerr << "usage: redis_worker race HOST PORT NAMESPACE THREADS | redis_worker spread HOST PORT NAMESPACE "
                 "THREADS KEYS | redis_worker hold-server | redis_worker hold-cluster\n";
    return 2;
}
