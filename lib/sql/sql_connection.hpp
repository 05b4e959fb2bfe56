// How the transaction runner talks to one session: the control statements of
// its dialect, with failures already translated to idem::store_error.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace soci {
class session;
}

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
    // Sends `statements` in order, then COMMIT when `then_commit`, in one round trip (PostgreSQL only).
    virtual void finish(std::span<const std::unique_ptr<deferred_statement>> statements, bool then_commit);
    [[nodiscard]] virtual bool can_finish() const noexcept { return false; }
    // The connection is gone: the server ends its open transaction by itself.
    [[nodiscard]] virtual bool broken() noexcept { return false; }
    // The connection's socket to its server, watched while a transaction is
    // open (answer_watch.hpp); -1 when it has none (SQLite).
    [[nodiscard]] virtual int socket() noexcept { return -1; }
};

// Control statements through SOCI itself, for a dialect without a connection of its own.
[[nodiscard]] std::unique_ptr<sql_connection> make_soci_connection(soci::session& session, std::string begin_sql);

}  // namespace idem::detail
