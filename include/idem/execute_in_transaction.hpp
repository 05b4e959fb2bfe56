// idem/execute_in_transaction.hpp: one idempotent unit of work, one transaction,
// opened by the executor itself.
//
// The same as runner.run(...) around executor.execute(tx, ...), with the same
// results, but the executor opens the transaction, so on PostgreSQL it costs no
// round trip beyond the business statements: BEGIN travels in one pipeline with
// the reserve, and the completed record in one pipeline with COMMIT.
//
//   auto e = idem::execute_in_transaction(exec, runner, key, fingerprint, {},
//       [&](idem::transaction& tx) {
//           tx.session() << "UPDATE accounts SET balance = balance - 10 WHERE id = 'alice'";
//           tx.session() << "UPDATE accounts SET balance = balance + 10 WHERE id = 'bob'";
//           return std::string("moved 10");
//       },
//       idem::string_codec{});
//   if (e.status() == idem::execution_status::replayed) ...  // ran before; the money moved once
//
// The transaction commits when the operation returns (and should_commit(e),
// when given, agrees) and rolls back when it throws. Nothing can run in it
// before the reserve: BEGIN is sent with the store's first statement, or before
// anything else the transaction is used for. The completing statement is the
// last one: it fails (and the transaction rolls back with a store_error) if it
// cannot complete the record this transaction reserved and holds locked.
// Called inside a transaction the runner already has open, the work joins it
// behind a savepoint, as run() does, without the fast path. On SQLite, and with
// stores that cannot join transactions, it behaves exactly like the plain form.
#pragma once

#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/export.hpp"
#include "idem/executor.hpp"
#include "idem/transaction_runner.hpp"

namespace idem {

namespace detail {

struct IDEM_API runner_access {
    template <class Work, class ShouldCommit>
    static decltype(auto) run_fast(transaction_runner& runner, Work&& work, ShouldCommit&& should_commit) {
        return runner.run_in(std::forward<Work>(work), std::forward<ShouldCommit>(should_commit), true);
    }
};

struct IDEM_API commit_always {
    template <class Execution>
    bool operator()(const Execution&) const noexcept {
        return true;
    }
};

}  // namespace detail

// Runs operation(transaction&) at most once per key, in a transaction of `runner`
// that holds the record too; should_commit(const execution<T>&) decides between
// commit and rollback once it returns (a rollback takes the record with it).
template <class T, class Operation, class ShouldCommit = detail::commit_always>
execution<T> execute_in_transaction(executor& exec, transaction_runner& runner, const record_key& key,
                                    std::string_view fingerprint, const execution_options& options,
                                    Operation&& operation, const result_codec<T>& codec,
                                    ShouldCommit&& should_commit = {}) {
    static_assert(std::is_invocable_v<Operation&, transaction&>, "the operation takes the transaction");
    return detail::runner_access::run_fast(
        runner,
        [&](transaction& tx) {
            return exec.execute(tx, key, fingerprint, options, [&]() -> decltype(auto) { return operation(tx); },
                                codec);
        },
        [&](const execution<T>& e) { return static_cast<bool>(should_commit(e)); });
}

}  // namespace idem
