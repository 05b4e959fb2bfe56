// idem/transaction_runner.hpp: one unit of work, one database transaction.
//
// Opens a transaction on your SOCI session, hands it to the work, commits when
// the work returns and rolls back (rethrowing) when it throws:
//
//   idem::transaction_runner runner{session};        // one runner per session, long-lived
//   auto receipt = runner.run([&](idem::unit_of_work& tx) {
//       tx.sql() << "UPDATE accounts SET balance = balance - 10 WHERE id = 'alice'";
//       return std::string("moved 10");
//   });
//
// Nesting, errors and states: docs/database.md#the-transaction-runner.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "idem/export.hpp"
#include "idem/telemetry.hpp"
#include "idem/unit_of_work.hpp"

namespace idem {

namespace detail {
struct runner_access;
}

enum class isolation_level { database_default, read_committed, repeatable_read, serializable };

struct IDEM_API transaction_options {
    // PostgreSQL only (transactional stores need read_committed there);
    // SQLite transactions are always serializable.
    isolation_level isolation = isolation_level::database_default;
    // PostgreSQL behind a pooler in transaction mode (PgBouncer
    // pool_mode=transaction): the next transaction may run on another server
    // connection, so the mapped objects' statements are not kept prepared
    // beyond the one they ran in.
    bool transaction_pooler = false;
    // Told what the destructor could not throw: a runner destroyed inside run()
    // (exit() called from the work) rolls its transaction back, and a ROLLBACK
    // that fails there is logged as idem.transaction.rollback_failed. Null: null_sink().
    std::shared_ptr<telemetry_sink> telemetry = nullptr;
    // The largest message (payload and headers) unit_of_work::publish accepts.
    std::size_t max_message_bytes = 256 * 1024;
    // PostgreSQL and MariaDB: a transaction whose server has sent nothing for
    // this long has its connection ended, as a lost one: a server stopped or
    // frozen (it still acknowledges TCP, so keepalives never end it), a
    // statement that runs that long, a transaction idle that long between
    // statements. Zero: waits for good.
    std::chrono::milliseconds answer_timeout{0};
};

class IDEM_API transaction_runner {
public:
    // The session must be connected (sqlite3 or postgresql backend) and outlive the runner.
    explicit transaction_runner(soci::session& session, transaction_options options = {});
    ~transaction_runner();
    transaction_runner(const transaction_runner&) = delete;
    transaction_runner& operator=(const transaction_runner&) = delete;

    // Runs work(unit_of_work&) in a transaction: committed when it returns,
    // rolled back (and the exception rethrown) when it throws. Returns its result.
    template <class Work>
    std::invoke_result_t<Work&, unit_of_work&> run(Work&& work) {
        return run(std::forward<Work>(work), always_commit{});
    }

    // As above, but commits only when should_commit(result) (should_commit()
    // for void work) is true; otherwise rolls back and still returns the result.
    template <class Work, class ShouldCommit>
    std::invoke_result_t<Work&, unit_of_work&> run(Work&& work, ShouldCommit&& should_commit) {
        return run_in(std::forward<Work>(work), std::forward<ShouldCommit>(should_commit), false);
    }

    [[nodiscard]] soci::session& session() const noexcept;
    [[nodiscard]] bool in_transaction() const noexcept;
    // The open transaction's state, else the last one's; empty before the first run.
    [[nodiscard]] std::optional<transaction_state> last_state() const noexcept;

private:
    struct always_commit {
        template <class... Result>
        bool operator()(const Result&...) const noexcept {
            return true;
        }
    };

    class impl;
    friend struct detail::runner_access;  // the fast path of idem::database::once()

    // `fast`: the executor opens the transaction (idem/detail/run_owned.hpp).
    template <class Work, class ShouldCommit>
    std::invoke_result_t<Work&, unit_of_work&> run_in(Work&& work, ShouldCommit&& should_commit, bool fast);

    // Opens the outermost transaction, or a savepoint (named in `savepoint`) in it.
    // `fast` lets a PostgreSQL transaction hold BEGIN back for a store's first statement.
    unit_of_work& enter(std::string& savepoint, bool fast);
    // Commits or rolls back the level `enter` opened.
    void leave(const std::string& savepoint, bool commit);
    // After an exception: rolls that level back and rethrows (nested in a
    // transaction_error when the rollback itself fails).
    [[noreturn]] void abandon(const std::string& savepoint);

    std::unique_ptr<impl> impl_;
};

template <class Work, class ShouldCommit>
std::invoke_result_t<Work&, unit_of_work&> transaction_runner::run_in(Work&& work, ShouldCommit&& should_commit,
                                                                      bool fast) {
    using result_type = std::invoke_result_t<Work&, unit_of_work&>;
    std::string savepoint;
    unit_of_work& tx = enter(savepoint, fast);
    try {
        if constexpr (std::is_void_v<result_type>) {
            work(tx);
            leave(savepoint, static_cast<bool>(should_commit()));
        } else {
            result_type result = work(tx);
            leave(savepoint, static_cast<bool>(should_commit(std::as_const(result))));
            return result;
        }
    } catch (...) {
        abandon(savepoint);
    }
}

}  // namespace idem
