// idem/unit_of_work.hpp: the one type every unit of work is handed: an open
// database transaction that the business writes and idem's records share.
//
//   auto moved = db.transact([&](idem::unit_of_work& uow) {
//       uow.sql() << "UPDATE accounts SET balance = balance - 10 WHERE id = 'alice'";
//       uow.savepoint([&] { write_optional_audit_row(uow.sql()); });  // may fail alone
//       return true;
//   });
//
// idem::database hands it to transact(), once() and every entry point's database
// form (HTTP, webhooks, the inbox); a transaction_runner hands the same type to
// run(). Business SQL goes through sql(); a record written through it commits or
// rolls back with that SQL. See docs/database.md.
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

class IDEM_API unit_of_work {
public:
    virtual ~unit_of_work() = default;

    // The session of this transaction: write business SQL here, as with SOCI. The
    // store's statements for the record go through the same session.
    [[nodiscard]] virtual soci::session& sql() = 0;
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
decltype(auto) unit_of_work::savepoint(Work&& work) {
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
