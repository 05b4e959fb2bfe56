// idem/transaction.hpp: an open database transaction that records can join.
//
// A transaction_runner (idem/transaction_runner.hpp) opens one on a SOCI
// session and hands it to your unit of work. Business writes go through
// session(); a transactional store writes its record through the same
// transaction, so both commit or roll back together:
//
//   runner.run([&](idem::transaction& tx) {
//       tx.session() << "UPDATE accounts SET balance = balance - 10 WHERE id = 1";
//       tx.savepoint([&] { write_optional_audit_row(tx.session()); });  // may fail alone
//   });
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "idem/export.hpp"

namespace soci {
class session;
}

namespace idem {

enum class transaction_state {
    active,
    committed,
    rolled_back,
    in_doubt,  // a commit or rollback failed midway (e.g. the connection broke): outcome unknown
};

[[nodiscard]] IDEM_API std::string_view to_string(transaction_state state) noexcept;

namespace detail {
class sql_transaction;
}

class IDEM_API transaction {
public:
    virtual ~transaction() = default;

    // The session the business writes and the store's statements share.
    [[nodiscard]] virtual soci::session& session() = 0;
    [[nodiscard]] virtual transaction_state state() const noexcept = 0;

    // Runs `work` behind a savepoint: released when it returns; when it throws,
    // rolled back to (undoing only what `work` did) and the exception rethrown.
    template <class Work>
    decltype(auto) savepoint(Work&& work);

    // What idem's SQL stores need of the runner (its dialect, per-connection
    // state, the fast path); opaque to applications.
    [[nodiscard]] virtual detail::sql_transaction& internals() noexcept = 0;

protected:
    // Opens a savepoint and returns its name.
    virtual std::string begin_savepoint() = 0;
    virtual void release_savepoint(const std::string& name) = 0;
    // ROLLBACK TO then RELEASE; a failure marks the transaction in doubt and throws.
    virtual void rollback_to_savepoint(const std::string& name) = 0;
};

template <class Work>
decltype(auto) transaction::savepoint(Work&& work) {
    const std::string name = begin_savepoint();
    try {
        if constexpr (std::is_void_v<std::invoke_result_t<Work&>>) {
            work();
            release_savepoint(name);
        } else {
            decltype(auto) result = work();
            release_savepoint(name);
            return result;
        }
    } catch (...) {
        rollback_to_savepoint(name);
        throw;
    }
}

}  // namespace idem
