// The part of a runner's transaction internals (sql_transaction.hpp) that lets
// a dialect whose connection can finish a transaction in one round trip (the
// PostgreSQL store's, through libpq pipelines; the MariaDB store's, with
// requests sent ahead of their answers and a compound statement) save the
// round trips of idem::database::once().
//
// There the executor opens the transaction itself, so the runner can hold
// BEGIN back until the store's first statement (the reserve), which sends both
// in one pipeline, and the store can leave its completing statement to the
// COMMIT, which the runner sends in one pipeline with it. Anything else that
// touches the transaction first (the session, a savepoint) gets what was held
// back sent before it, so nothing ever runs out of order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "idem/export.hpp"
#include "idem/transaction_runner.hpp"

namespace soci {
class session;
}

namespace idem::detail {

// A statement a store leaves to the end of the transaction. Opaque to the
// runner: only the connection of the store's own dialect, which the runner
// hands it to with COMMIT (sql_connection::finish), knows how to send it.
class IDEM_API deferred_statement {
public:
    virtual ~deferred_statement() = default;
};

// A statement of idem's own tables other than a store's (an outbox message's
// INSERT) left to the COMMIT. Its text numbers its parameters $1, $2, ..., as
// the connections that can finish a transaction (libpq's) do.
struct IDEM_API deferred_sql final : deferred_statement {
    using value = std::variant<std::monostate, std::string, std::int64_t>;  // NULL, bytes (or text), BIGINT

    deferred_sql(const char* text, std::string_view operation, bool keep, std::vector<value> parameters)
        : sql(text), what(operation), kept(keep), values(std::move(parameters)) {}

    const char* sql;        // static text: the connection prepares it once, by its address
    std::string_view what;  // names the operation in errors
    bool kept;              // prepared on the connection (sql_transaction::keeps_statements), or sent unnamed
    std::vector<value> values;
};

class IDEM_API fast_path {
public:
    // The BEGIN this transaction still holds back, or null once it was sent. A
    // store that sends it in one pipeline with its own statement calls begin_sent().
    [[nodiscard]] virtual const char* held_begin() const noexcept = 0;
    virtual void begin_sent() noexcept = 0;
    // The level that BEGIN asks for (transaction_options::isolation). A statement
    // sent before it, outside the transaction, runs at the session's default
    // level: the transaction's own only when BEGIN names none (database_default).
    [[nodiscard]] virtual isolation_level isolation() const noexcept = 0;

    // The session for a store's statements: a deferred statement is sent first,
    // a held BEGIN is not (see held_begin()).
    [[nodiscard]] virtual soci::session& store_session() = 0;
    // The session with nothing sent: for a store that defers a statement (it
    // finds the statements it keeps for the connection through it). Anything
    // that sends first sends what was deferred before, in its own round trip.
    [[nodiscard]] virtual soci::session& deferring_session() noexcept = 0;

    // Whether a statement may wait for the COMMIT: a transaction of
    // idem::database::once, outside any savepoint. Deferred statements go out
    // in the order they were deferred, before anything else touches the
    // transaction, or in one round trip with COMMIT.
    [[nodiscard]] virtual bool may_defer() const noexcept = 0;
    virtual void defer(std::unique_ptr<deferred_statement> statement) = 0;

    // Different for every transaction a runner opens: lets a store recognise a
    // reservation it made in this very transaction.
    [[nodiscard]] virtual std::uint64_t serial() const noexcept = 0;

protected:
    ~fast_path() = default;
};

}  // namespace idem::detail
