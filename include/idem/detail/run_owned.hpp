// idem/detail/run_owned.hpp: a unit of work whose transaction the executor
// opens itself, so that in Enforce it can write the record in one statement.
// Not API: idem::database::once() and the entry points' database forms are
// built on it (idem/database.hpp).
//
// The executor opens the transaction, and can roll it back and run it again: it
// looks the key up (on PostgreSQL in one pipeline with BEGIN), runs the
// operation, then inserts the completed record (on PostgreSQL in one pipeline
// with COMMIT). It costs no round trip beyond the business statements, and a
// replay is a read. While most lookups on a PostgreSQL connection find a record
// that answers them (a burst of retries), the lookup goes before BEGIN, outside
// the transaction: a replay is then one round trip, and a call that runs its
// work sends BEGIN alone before it.
//
// A concurrent duplicate of a call in progress may run its operation too: its
// record insert then waits for the first transaction and fails when that one
// commits, so its transaction (business writes and all) rolls back, and it
// answers replayed (or key_reused) from the winner's record; the same when its
// operation itself fails on what the first one wrote. Its own result is
// discarded. So the operation must have no effect outside the transaction (the
// rule for Enforce in a transaction anyway); where it must not even start twice,
// set execution_options::reserve_first. The key is reserved first (BEGIN sent
// with the reserve, the completion with COMMIT) with reserve_first, when a
// record in flight or an expired one is in the way, and called inside a
// transaction the runner already has open, where the work joins it behind a
// savepoint. On SQLite (BEGIN IMMEDIATE: no concurrent duplicate gets past the
// lookup) and with stores that cannot join transactions, it behaves the same
// as reserving first.
#pragma once

#include <exception>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/transaction_runner.hpp"
#include "idem/transactional_record_store.hpp"

namespace idem {

namespace detail {

struct runner_access {
    template <class Work, class ShouldCommit>
    static decltype(auto) run_fast(transaction_runner& runner, Work&& work, ShouldCommit&& should_commit) {
        return runner.run_in(std::forward<Work>(work), std::forward<ShouldCommit>(should_commit), true);
    }
};

// Runs call(tx, owned_run&) (an executor call) in a transaction of `runner`
// opened for it, or behind a savepoint in the one the runner has open (where the
// executor reserves first: it cannot roll back a transaction it did not open).
// Work that ran without a reservation can fail because a concurrent duplicate
// ran first: its record insert lost (the whole transaction rolls back, business
// writes and all), or the work itself failed on what the duplicate wrote. A new
// transaction then looks the key up, and the winner's record answers the call;
// without one the failure stands (a lost insert, or a deadlock, runs the call again).
template <class T, class Call, class ShouldCommit>
execution<T> run_owned(executor& exec, transaction_runner& runner, Call&& call, ShouldCommit&& should_commit) {
    const bool owns = !runner.in_transaction();
    // Each lost race needs another transaction to have committed the key; a run
    // after it replays, unless that record ended (released, purged) meanwhile.
    constexpr int attempts = 8;
    for (int attempt = 1;; ++attempt) {
        owned_run owned{.role = owns ? owned_role::opens : owned_role::joins};
        std::exception_ptr failure;
        bool lost = false;
        try {
            execution<T> e = runner_access::run_fast(
                runner, [&](unit_of_work& tx) { return call(tx, owned); },
                [&](const execution<T>& done) { return static_cast<bool>(should_commit(done)); });
            executor_access::settle(exec, owned);
            return e;
        } catch (const store_error& e) {
            // The insert lost to a concurrent record, or a deadlock with a duplicate
            // that reserved first (its reservation waits for rows this run holds).
            lost = (owned.progress == owned_progress::inserted && lost_to_concurrent_record(e)) ||
                   (owned.started_unreserved() && e.failure() == store_failure::conflict);
            failure = std::current_exception();
        } catch (...) {
            failure = std::current_exception();
        }
        if (!lost) executor_access::settle(exec, owned);
        // A transaction that committed (a hook failed after it) or whose end is unknown has no winner to ask.
        if (!owned.started_unreserved() || runner.last_state() == transaction_state::in_doubt ||
            runner.last_state() == transaction_state::committed || attempt == attempts)
            std::rethrow_exception(failure);
        owned_run answering{.role = owned_role::answers};
        try {
            execution<T> e = runner_access::run_fast(
                runner, [&](unit_of_work& tx) { return call(tx, answering); },
                [](const execution<T>&) { return false; });  // a read: nothing to commit
            if (answering.progress != owned_progress::unanswered) return e;
        } catch (...) {
            // The failure that led here is the one to report.
        }
        if (!lost) std::rethrow_exception(failure);
    }
}

// Runs operation(uow) as the work of the record `key` in the db.once call
// `call` (the ids of the messages it publishes derive from both), then flushes what the unit of work holds back
// (its changed mapped objects, its messages), so that those writes precede the
// record the executor writes next.
template <class Operation>
decltype(auto) flushed(unit_of_work& uow, const record_key& key, publishing_call& call, Operation& operation) {
    const publishing_record publishing(uow, key, call);
    if constexpr (std::is_void_v<std::invoke_result_t<Operation&, unit_of_work&>>) {
        operation(uow);
        uow.flush();
    } else {
        decltype(auto) result = operation(uow);
        uow.flush();
        return result;
    }
}

struct commit_always {
    template <class Execution>
    bool operator()(const Execution&) const noexcept {
        return true;
    }
};

// Runs operation(unit_of_work&) at most once per key, in a transaction of `runner`
// that holds the record too; should_commit(const execution<T>&) decides between
// commit and rollback once it returns (a rollback takes the record with it).
template <class T, class Operation, class ShouldCommit = commit_always>
execution<T> execute_in_transaction(executor& exec, transaction_runner& runner, const record_key& key,
                                    std::string_view fingerprint, const execution_options& options,
                                    Operation&& operation, const result_codec<T>& codec,
                                    ShouldCommit&& should_commit = {}) {
    static_assert(std::is_invocable_v<Operation&, unit_of_work&>, "the operation takes the transaction");
    publishing_call call;
    return run_owned<T>(
        exec, runner,
        [&](unit_of_work& tx, owned_run& owned) {
            // The work's held-back writes (its changed objects) go before the record.
            auto bound = [&]() -> decltype(auto) { return flushed(tx, key, call, operation); };
            return executor_access::execute_in(exec, tx, key, fingerprint, options, bound, codec, {}, &owned);
        },
        should_commit);
}

}  // namespace detail
}  // namespace idem
