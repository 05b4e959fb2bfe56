// The part of a runner's transaction internals (sql_transaction.hpp) that lets
// a dialect whose connection can finish a transaction in one round trip (the
// PostgreSQL store's, through libpq pipelines) save the round trips of
// idem::database::once().
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

    // Whether a statement may wait for the COMMIT: a transaction of
    // idem::database::once, outside any savepoint, holding no other yet.
    [[nodiscard]] virtual bool may_defer() const noexcept = 0;
    virtual void defer(std::unique_ptr<deferred_statement> statement) = 0;

    // Different for every transaction a runner opens: lets a store recognise a
    // reservation it made in this very transaction.
    [[nodiscard]] virtual std::uint64_t serial() const noexcept = 0;

protected:
    ~fast_path() = default;
};

}  // namespace idem::detail
