// The worker side of the multi-process tests of the SQL stores (transfer_race.hpp
// and migration_race.hpp start the workers): racing transfers and migrating
// from the instant "go" names, and standing still to be killed mid-transfer.
#pragma once

#include <unistd.h>

#include <atomic>
#include <iostream>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "bank.hpp"
#include "idem/store_admin.hpp"
#include "worker_main.hpp"

namespace idem::test {

// Every thread tries the transfers "transfer-0" to "transfer-<rounds - 1>" in turn,
// on a business connection of its own that `connect(session)` opens, all from
// the instant "go" names; prints "executed replayed other errors".
// `transfer(thread, runner, key)` moves 10 once for `key` and says how it went.
template <class Connect, class Transfer>
int race_transfers_from_go(int threads, int rounds, Connect connect, Transfer transfer) {
    std::atomic<int> executed{0};
    std::atomic<int> replayed{0};
    std::atomic<int> other{0};
    std::atomic<int> errors{0};
    std::latch ready(threads + 1);
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            soci::session session;
            connect(session);
            transaction_runner runner{session};
            ready.arrive_and_wait();
            for (int round = 0; round < rounds; ++round) {
                try {
                    switch (transfer(t, runner, "transfer-" + std::to_string(round))) {
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

// Migrates from the instant "go" names; prints how many migrations it applied, then their names.
inline int migrate_from_go(store_admin& store) {
    await_go();
    const auto applied = store.migrate();
    std::cout << applied.size();
    for (const auto& name : applied) std::cout << " " << name;
    std::cout << std::endl;
    return 0;
}

// Called between a transfer's writes and its commit: says "written" and waits
// for the test to kill the process there.
[[noreturn]] inline void wait_to_be_killed() {
    std::cout << "written" << std::endl;
    for (;;) pause();
}

}  // namespace idem::test
