// The libpq connection behind a SOCI postgresql session: statements with binary
// parameters and results, prepared once per connection, several of them sent
// in one round trip (pipeline mode), and SQLSTATEs as idem::store_error.
// soci-postgresql.h and libpq-fe.h come with it: include only from .cpp files.
#pragma once

#include <libpq-fe.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/clock.hpp"
#include "idem/error.hpp"
#include "sql/fast_path.hpp"

namespace soci {
class session;
}

namespace idem::detail {
class sql_dialect;
}

namespace idem::detail::pg {

// The type OIDs statements declare (pg_type_d.h is a server header).
inline constexpr Oid bool_oid = 16;
inline constexpr Oid bytea_oid = 17;
inline constexpr Oid int8_oid = 20;
inline constexpr Oid interval_oid = 1186;

// The connection of a connected postgresql session; std::invalid_argument for any other session.
[[nodiscard]] PGconn* native_handle(soci::session& session);

// PostgreSQL as the runner speaks it (through libpq: exact SQLSTATEs, the
// fast path), registered by the PostgreSQL store's library as it loads.
[[nodiscard]] const sql_dialect& dialect() noexcept;
void install_dialect() noexcept;
// Registers the URLs the store answers and its factory with the store registry (postgresql_factory.cpp).
void register_store();
// The connection is gone (the server went away, or a read or write on it failed).
[[nodiscard]] bool broken(const PGconn* conn) noexcept;
// The server last said it takes no writes: a standby (in_hot_standby), or a
// primary made read-only (default_transaction_read_only). PostgreSQL 14 and
// later report both on every change, with the next answer; no round trip.
[[nodiscard]] bool on_read_only_server(const PGconn* conn) noexcept;
// For a connection that sat idle in a pool: reads what the server sent meanwhile
// (a server that shut down says so, then closes the socket) without a round trip.
// False when it is no longer usable, or its server takes no writes any more.
[[nodiscard]] bool still_usable(PGconn* conn) noexcept;
// Drops what the server says outside any statement (notices, the FATAL of a
// shutdown) instead of libpq's default of printing it to stderr.
void silence_notices(PGconn* conn) noexcept;

[[nodiscard]] store_failure classify(std::string_view sqlstate) noexcept;
// The error of a failed `result` (null when libpq had none) on `conn`. Its
// message names `what`, the condition and the SQLSTATE, never the server's
// text, which can quote bound values.
[[nodiscard]] store_error error(const PGconn* conn, const PGresult* result, std::string_view what);
// The same from a SQLSTATE (empty when libpq had none).
[[nodiscard]] store_error error(const PGconn* conn, std::string sqlstate, std::string_view what);

class result {
public:
    result() noexcept = default;
    explicit result(PGresult* r) noexcept : result_(r) {}
    ~result() { PQclear(result_); }
    result(result&& other) noexcept : result_(std::exchange(other.result_, nullptr)) {}
    result& operator=(result&& other) noexcept;
    result(const result&) = delete;
    result& operator=(const result&) = delete;

    [[nodiscard]] const PGresult* get() const noexcept { return result_; }
    [[nodiscard]] ExecStatusType status() const noexcept { return PQresultStatus(result_); }
    [[nodiscard]] int rows() const noexcept { return PQntuples(result_); }
    [[nodiscard]] bool is_null(int row, int column) const noexcept { return PQgetisnull(result_, row, column) != 0; }
    // Rows an INSERT, UPDATE or DELETE changed.
    [[nodiscard]] std::size_t affected() const noexcept;

    // Binary-format columns; store_error(corrupt_record) when a value has the wrong size.
    [[nodiscard]] std::string_view bytes(int row, int column) const noexcept;
    [[nodiscard]] bool boolean(int row, int column) const;
    [[nodiscard]] std::int64_t int8(int row, int column) const;
    [[nodiscard]] time_point timestamp(int row, int column) const;

private:
    PGresult* result_ = nullptr;
};

// Runs SQL without parameters through the simple protocol (several statements
// allowed; one round trip) and throws store_error when it fails.
result execute(PGconn* conn, const char* sql, std::string_view what);
// The COMMIT a result answers rolled back instead (the transaction had failed).
[[nodiscard]] bool commit_rolled_back(const result& commit) noexcept;
[[nodiscard]] store_error rolled_back_error();

// A statement with binary parameters and binary results. Each connection
// prepares it once, under a name of its own (statement_names), or, behind a
// transaction pooler, sends it unnamed each time.
struct statement_text {
    const char* sql;
    std::span<const Oid> parameter_types;
    std::string_view what;  // names the operation in errors
};

// Parameters in binary format. Byte values are kept by pointer: they must
// outlive the statement's run. Not movable: the pointers may point inside.
class parameters {
public:
    static constexpr std::size_t capacity = 10;

    parameters() { formats_.fill(1); }
    parameters(const parameters&) = delete;
    parameters& operator=(const parameters&) = delete;

    parameters& null();
    parameters& bytes(std::string_view value);
    parameters& bytes(std::span<const std::byte> value);
    parameters& int8(std::int64_t value);
    parameters& boolean(bool value);
    // An interval of whole microseconds (rounded up, so a positive one never ends at once).
    parameters& interval(duration value);

    [[nodiscard]] int count() const noexcept { return static_cast<int>(count_); }
    [[nodiscard]] const char* const* values() const noexcept { return values_.data(); }
    [[nodiscard]] const int* lengths() const noexcept { return lengths_.data(); }
    [[nodiscard]] const int* formats() const noexcept { return formats_.data(); }

private:
    char* scratch();

    std::array<const char*, capacity> values_{};
    std::array<int, capacity> lengths_{};
    std::array<int, capacity> formats_{};
    std::array<std::array<char, 16>, capacity> scratch_{};
    std::size_t count_ = 0;
};

// Several statements, one round trip: libpq's pipeline mode with one Sync.
// Queue statements, then run(): it reads every result in order, leaves
// pipeline mode and throws the first failure. Statements after a failed one
// do not run; inside a transaction block the transaction is then aborted.
class pipeline {
public:
    explicit pipeline(PGconn* conn);
    // Leaves pipeline mode if run() did not (a failure while queueing).
    ~pipeline();
    pipeline(const pipeline&) = delete;
    pipeline& operator=(const pipeline&) = delete;

    // A statement without parameters (BEGIN, COMMIT).
    void query(const char* sql, std::string_view what);
    // Prepares `text` as `name`; `*prepared` becomes true once the server has it.
    void prepare(const std::string& name, const statement_text& text, bool* prepared);
    // Whether a prepare that sets `*prepared` is queued already (a statement run twice in one pipeline).
    [[nodiscard]] bool preparing(const bool* prepared) const noexcept;
    // Runs the prepared statement `name`.
    void execute(const std::string& name, const statement_text& text, const parameters& values);
    // Parses and runs `text` as the unnamed statement: nothing of it outlives the pipeline.
    void execute(const statement_text& text, const parameters& values);

    void run();
    // The result of the last queued statement (after run()).
    [[nodiscard]] const result& last() const noexcept { return items_.back().outcome; }
    // How many items are queued, and item n's result: after run(), even one that
    // threw (a statement after a failed one has a result saying it did not run).
    [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
    [[nodiscard]] const result& outcome(std::size_t n) const noexcept { return items_[n].outcome; }

private:
    struct item {
        std::string_view what;
        bool* prepared = nullptr;
        result outcome;
    };

    item& add(std::string_view what);
    [[noreturn]] void fail_to_send(std::string_view what);
    void leave() noexcept;

    PGconn* conn_;
    std::vector<item> items_;
    bool active_ = false;
};

// A statement the PostgreSQL store leaves to the end of its transaction: the
// runner hands it back to this dialect's connection, which queues it on the
// pipeline that ends the transaction, before COMMIT (or alone, when something
// else needs the transaction first).
class deferred : public detail::deferred_statement {
public:
    // It must fail (an error, not an empty result) when it cannot do its work,
    // so that the COMMIT behind it does not happen.
    virtual void queue(pipeline& p) = 0;
    // Queues the COMMIT that follows it: as text, unless its store has COMMIT
    // prepared on this connection.
    virtual void queue_commit(pipeline& p) { p.query("COMMIT", "COMMIT"); }
    // The pipeline it was queued on failed: throws the error to report instead
    // (a record a concurrent transaction committed first), or returns to let the
    // pipeline's failure stand.
    virtual void failed(const pipeline& p) { (void)p; }
};

// A statement prepared on one connection, with the name it has there; an empty
// name sends it unnamed each time (a transaction pooler hands each transaction
// any server connection, where a named statement may be missing or taken).
struct prepared_statement {
    const statement_text* text;
    std::string name;
    bool prepared = false;

    // Queues it on `p`, preparing it first when this connection has not yet.
    void queue(pipeline& p, const parameters& values) {
        if (name.empty()) return p.execute(*text, values);
        if (!prepared && !p.preparing(&prepared)) p.prepare(name, *text, &prepared);
        p.execute(name, *text, values);
    }
};

// A prefix for statement names no other set of statements on any connection of
// this process uses ("idem7_"), so two sets never collide on one connection.
[[nodiscard]] std::string statement_names();

}  // namespace idem::detail::pg
