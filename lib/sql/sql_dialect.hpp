// One SQL dialect, as the transaction runner and the migrations need to know
// it: how a transaction begins, its control connection, how its driver's
// errors read. The library that links a dialect's driver (a store's library)
// registers its dialect as it loads, so idem_sql itself names no dialect and
// links no driver: a new dialect is a store folder with one sql_dialect in it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "idem/detail/mapped_table.hpp"
#include "idem/export.hpp"
#include "idem/transaction_runner.hpp"

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
    // A statement that queues concurrent migrations, run first in their
    // transaction; empty when the dialect needs none.
    [[nodiscard]] virtual std::string_view migration_lock() const noexcept { return {}; }
    // What a SELECT of mapped rows ends with to hold them until COMMIT (" FOR
    // UPDATE"); empty where writers are serialised anyway (SQLite).
    [[nodiscard]] virtual std::string_view lock_clause() const noexcept { return {}; }
    // What a SELECT of rows one worker takes for itself ends with, so that
    // concurrent workers pass over them (" FOR UPDATE SKIP LOCKED"); empty
    // where writers are serialised anyway.
    [[nodiscard]] virtual std::string_view claim_clause() const noexcept { return {}; }
    // What a subquery reading a row that must not change until COMMIT ends
    // with, passing over rows another transaction holds (" FOR SHARE SKIP
    // LOCKED"); empty where writers are serialised anyway.
    [[nodiscard]] virtual std::string_view share_clause() const noexcept { return {}; }
    // A statement run first in a transaction that claims from, settles or
    // purges a queue table (the outbox), or empty: how the database should
    // plan and commit that bookkeeping (see the PostgreSQL dialect).
    [[nodiscard]] virtual std::string_view queue_settings() const noexcept { return {}; }
    // A condition true for the rows whose `column` is among those `subquery`
    // returns, the subquery run once and its rows looked up through the
    // column's index; by default "column IN (subquery)".
    [[nodiscard]] virtual std::string among(std::string_view column, std::string_view subquery) const;
    // A query a claim runs before it takes in the outbox's intake, true when this
    // transaction may (the others' take-ins are done or will wait for it),
    // false when another is taking in now: what each takes in comes after
    // what the one before it took. Empty where writers are serialised anyway.
    [[nodiscard]] virtual std::string_view intake_lock() const noexcept { return {}; }
    // Whether bytes go through SOCI as hex text (PostgreSQL: SOCI binds text
    // parameters, which stop at a NUL) rather than as they are (SQLite).
    [[nodiscard]] virtual bool bytes_as_hex() const noexcept { return false; }
    // The database's clock as an SQL expression: whole milliseconds since the
    // Unix epoch. What instances with skewed clocks agree on (operations' leases).
    [[nodiscard]] virtual std::string_view clock_ms() const noexcept = 0;
    // The column type of a mapped member in db.create_table<T>(); `max` is an
    // integer member's largest value. By default SQL's own names, which SQLite
    // reads with the affinities (and SOCI with the types) the members need.
    [[nodiscard]] virtual std::string column_type(field_kind kind, long long max) const;

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
