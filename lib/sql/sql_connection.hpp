// How the transaction runner talks to one session: the control statements of
// its dialect, with failures already translated to idem::store_error.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "idem/export.hpp"
#include "idem/transaction_runner.hpp"

namespace idem::detail {

class deferred_statement;

class IDEM_API sql_connection {
public:
    virtual ~sql_connection() = default;

    virtual void begin() = 0;
    virtual void commit() = 0;
    virtual void rollback() = 0;
    // A control statement without results (SAVEPOINT, RELEASE, ROLLBACK TO).
    virtual void execute(const std::string& sql, std::string_view what) = 0;

    // The statement begin() sends.
    [[nodiscard]] virtual const std::string& begin_sql() const noexcept = 0;
    // Sends `last`, then COMMIT when `then_commit`, in one round trip (PostgreSQL only).
    virtual void finish(deferred_statement& last, bool then_commit);
    [[nodiscard]] virtual bool can_finish() const noexcept { return false; }
    // The connection is gone: the server ends its open transaction by itself.
    [[nodiscard]] virtual bool broken() noexcept { return false; }
};

// The dialect a connected session speaks; std::invalid_argument for anything else.
[[nodiscard]] IDEM_API sql_dialect dialect_of(soci::session& session);

[[nodiscard]] std::unique_ptr<sql_connection> make_soci_connection(soci::session& session, std::string begin_sql);

// A dialect's connection through its driver's own API, provided by the library
// that links the driver, when it is loaded: the SQLite store's library
// (sqlite3) provides SQLite's, the PostgreSQL store's library (libpq)
// PostgreSQL's, so idem_sql itself links no driver. Without one the runner
// speaks to that dialect through SOCI.
using native_connection_factory = std::unique_ptr<sql_connection> (*)(soci::session& session, std::string begin_sql);
IDEM_API void provide_native_connection(sql_dialect dialect, native_connection_factory factory) noexcept;
[[nodiscard]] native_connection_factory native_connection(sql_dialect dialect) noexcept;

}  // namespace idem::detail
