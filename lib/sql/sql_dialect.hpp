// One SQL dialect, as the layers above the stores need to know it: how a
// transaction begins, its control connection, how its driver's errors read,
// and every statement idem sends to its own tables. The library that links a dialect's driver (a store's library)
// registers its dialect as it loads, so idem_sql itself names no dialect and
// links no driver: a new dialect is a store folder with one sql_dialect in it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "idem/export.hpp"
#include "idem/transaction_runner.hpp"
#include "sql/mapping_statements.hpp"
#include "sql/operations_statements.hpp"
#include "sql/outbox_statements.hpp"
#include "sql/schema_statements.hpp"

namespace soci {
class session;
}

namespace idem::detail {

class sql_connection;

class IDEM_API sql_dialect {
public:
    virtual ~sql_dialect() = default;

    // SOCI's name for the backend that speaks it ("sqlite3", "postgresql").
    [[nodiscard]] virtual std::string_view soci_backend() const noexcept = 0;
    // The statement that opens a transaction with these options.
    [[nodiscard]] virtual std::string begin_sql(const transaction_options& options) const = 0;
    // The runner's control connection on `session`; by default through SOCI itself.
    [[nodiscard]] virtual std::unique_ptr<sql_connection> connect(soci::session& session, std::string begin_sql) const;
    // Called inside a catch block: throws the store_error for a driver exception
    // it recognises (exact codes, broken connections) and returns otherwise.
    virtual void translate_error(std::string_view what, soci::session* session) const;
    // Whether bytes go through SOCI as hex text (PostgreSQL: SOCI binds text
    // parameters, which stop at a NUL) rather than as they are (SQLite). The
    // statements below that take or return bytes convert them themselves.
    [[nodiscard]] virtual bool bytes_as_hex() const noexcept { return false; }
    // Every statement idem sends to its own tables, in this dialect's SQL.
    [[nodiscard]] virtual const outbox_statements& outbox() const noexcept = 0;
    [[nodiscard]] virtual const operations_statements& operations() const noexcept = 0;
    [[nodiscard]] virtual const schema_statements& schema() const noexcept = 0;
    [[nodiscard]] virtual const mapping_statements& mapping() const noexcept = 0;

protected:
    sql_dialect() = default;
    sql_dialect(const sql_dialect&) = default;
    sql_dialect& operator=(const sql_dialect&) = default;
};

// Makes `dialect` (an object that lives as long as the process) the one for
// its SOCI backend, replacing any registered before.
IDEM_API void register_dialect(const sql_dialect& dialect) noexcept;

// The dialect of a connected session; std::invalid_argument when none is
// registered for its backend (its store's library is not linked).
[[nodiscard]] IDEM_API const sql_dialect& dialect_of(soci::session& session);

// Every registered dialect's translate_error, in turn (see soci_errors.hpp).
void translate_driver_error(std::string_view what, soci::session* session);

}  // namespace idem::detail
