// The racing-processes test every SQL store runs: N worker processes with T
// threads (or connections) each try the same transfer keys at one instant;
// every key must move the money exactly once.
#pragma once

#include <doctest/doctest.h>

#include <sstream>

#include "bank.hpp"
#include "worker_processes.hpp"

namespace idem::test {

// `worker_args`: the worker command that runs "transfer THREADS ROUNDS" and
// prints "executed replayed other errors".
inline void race_transfers(soci::session& session, record_store& store, std::vector<std::string> worker_args,
                           int processes, int threads, int rounds) {
    worker_args.push_back(std::to_string(threads));
    worker_args.push_back(std::to_string(rounds));
    auto children = start_workers(processes, worker_args);
    release_together(children);
    const auto started = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);

    long long executed = 0, replayed = 0, other = 0, errors = 0;
    std::string per_process;
    for (auto& c : children) {
        std::istringstream line(line_of(*c));
        long long e = -1, r = -1, o = -1, x = -1;
        line >> e >> r >> o >> x;
        executed += e;
        per_process += " " + std::to_string(e);
        replayed += r;
        other += o;
        errors += x;
        CHECK(exit_code(*c) == 0);
    }
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    MESSAGE(processes << " processes x " << threads << " threads x " << rounds << " transfers: " << executed
                      << " executed (per process:" << per_process << "), " << replayed << " replayed in "
                      << elapsed.count() << " ms");

    CHECK(errors == 0);
    CHECK(other == 0);  // inside the transaction a duplicate waits for the commit: never in flight
    CHECK(executed == rounds);
    CHECK(executed + replayed == static_cast<long long>(processes) * threads * rounds);
    CHECK(bank::balance(session, "alice") == bank::opening_balance - 10 * rounds);
    CHECK(bank::balance(session, "bob") == bank::opening_balance + 10 * rounds);
    CHECK(bank::count(session, "SELECT count(*) FROM ledger") == rounds);
    CHECK(bank::count(session, "SELECT count(DISTINCT transfer_key) FROM ledger") == rounds);
    for (int round = 0; round < rounds; ++round) {
        auto r = store.try_reserve(bank::transfer_key("transfer-" + std::to_string(round)), bank::fingerprint,
                                   std::chrono::minutes(1));
        CHECK(r.status == reservation_status::completed);
        CHECK(r.payload == "moved 10");
    }
}

}  // namespace idem::test
