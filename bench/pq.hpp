// Hand-written SQL on a PostgreSQL connection, as pgbench sends it: prepared
// statements through libpq, text or binary parameters, and pipelines (several
// statements, one round trip). The benchmark's baselines use it, so they pay
// no client library cost the library under test does not also pay.
#pragma once

#include <libpq-fe.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace idem::bench::pq {

// One statement's parameters: text values (format 0) or bytes (format 1).
class values {
public:
    values& text(std::string v) { return add(std::move(v), 0); }
    values& bytes(std::string_view v) { return add(std::string(v), 1); }
    values& bytes(const void* data, std::size_t size) {
        return add(std::string(static_cast<const char*>(data), size), 1);
    }

    [[nodiscard]] int count() const { return static_cast<int>(held_.size()); }
    [[nodiscard]] const char* const* pointers() const { return pointers_.data(); }
    [[nodiscard]] const int* lengths() const { return lengths_.data(); }
    [[nodiscard]] const int* formats() const { return formats_.data(); }

private:
    values& add(std::string v, int format) {
        held_.push_back(std::move(v));
        formats_.push_back(format);
        // The strings may move as held_ grows: point at them afresh.
        pointers_.clear();
        lengths_.clear();
        for (const auto& h : held_) {
            pointers_.push_back(h.data());
            lengths_.push_back(static_cast<int>(h.size()));
        }
        return *this;
    }

    std::vector<std::string> held_;
    std::vector<const char*> pointers_;
    std::vector<int> lengths_, formats_;
};

[[noreturn]] inline void fail(PGconn* conn, std::string_view what) {
    throw std::runtime_error("bench: " + std::string(what) + ": " + PQerrorMessage(conn));
}

// Whether `r` succeeded; frees it. A failure other than `tolerated` (a SQLSTATE) throws.
inline bool consume(PGconn* conn, PGresult* r, std::string_view what, const char* tolerated = nullptr) {
    const ExecStatusType status = PQresultStatus(r);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_PIPELINE_SYNC;
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const bool tolerated_failure =
        !ok && tolerated != nullptr && state != nullptr && std::string_view(state) == tolerated;
    const std::string message = ok || tolerated_failure ? "" : PQresultErrorMessage(r);
    PQclear(r);
    if (!ok && !tolerated_failure)
        throw std::runtime_error("bench: " + std::string(what) + ": " + message + " (" + PQerrorMessage(conn) + ")");
    return ok;
}

inline void execute(PGconn* conn, const char* sql) {
    consume(conn, PQexec(conn, sql), sql);
}

inline void prepare(PGconn* conn, const char* name, const std::string& sql) {
    consume(conn, PQprepare(conn, name, sql.c_str(), 0, nullptr), name);
}

inline void run(PGconn* conn, const char* name, const values& v = {}) {
    consume(conn, PQexecPrepared(conn, name, v.count(), v.pointers(), v.lengths(), v.formats(), 0), name);
}

// One value per row of `sql`'s first column.
inline std::vector<std::string> column(PGconn* conn, const std::string& sql) {
    PGresult* r = PQexec(conn, sql.c_str());
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        PQclear(r);
        fail(conn, sql);
    }
    std::vector<std::string> values;
    for (int i = 0; i < PQntuples(r); ++i) values.emplace_back(PQgetvalue(r, i, 0));
    PQclear(r);
    return values;
}

// Empties `table` and fills it with `insert` (INSERT ... SELECT ... FROM
// generate_series: the server writes the rows, no client round trip per row),
// its primary key and indexes dropped for the fill and built afterwards (a sort
// each, instead of millions of random insertions); then VACUUM ANALYZE and a
// CHECKPOINT, so the measurement starts from a settled table.
inline void refill(PGconn* conn, const std::string& table, const std::string& insert) {
    execute(conn, ("TRUNCATE " + table).c_str());
    execute(conn, "SET maintenance_work_mem = '1GB'");
    const std::string relation = "'" + table + "'::regclass";
    const auto primary =
        column(conn, "SELECT conname FROM pg_constraint WHERE contype = 'p' AND conrelid = " + relation);
    const auto definitions =
        column(conn, "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = " + relation);
    const auto unique =
        column(conn, "SELECT conname FROM pg_constraint WHERE contype = 'u' AND conrelid = " + relation);
    for (const auto& name : primary) execute(conn, ("ALTER TABLE " + table + " DROP CONSTRAINT " + name).c_str());
    for (const auto& name : unique) execute(conn, ("ALTER TABLE " + table + " DROP CONSTRAINT " + name).c_str());
    for (const auto& name :
         column(conn, "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = " + relation))
        execute(conn, ("DROP INDEX " + name).c_str());
    execute(conn, insert.c_str());
    for (const auto& definition : definitions) execute(conn, definition.c_str());
    for (const auto& name : primary)
        execute(conn,
                ("ALTER TABLE " + table + " ADD CONSTRAINT " + name + " PRIMARY KEY USING INDEX " + name).c_str());
    for (const auto& name : unique)
        execute(conn, ("ALTER TABLE " + table + " ADD CONSTRAINT " + name + " UNIQUE USING INDEX " + name).c_str());
    execute(conn, ("VACUUM ANALYZE " + table).c_str());
    execute(conn, "CHECKPOINT");
}

// Statements sent together and answered together: one round trip.
class pipeline {
public:
    explicit pipeline(PGconn* conn) : conn_(conn) {
        if (PQenterPipelineMode(conn_) != 1) fail(conn_, "entering pipeline mode");
    }
    ~pipeline() { (void)PQexitPipelineMode(conn_); }  // when run() did not
    pipeline(const pipeline&) = delete;
    pipeline& operator=(const pipeline&) = delete;

    pipeline& query(const char* sql) {
        if (PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) fail(conn_, sql);
        ++sent_;
        return *this;
    }
    pipeline& prepared(const char* name, const values& v) {
        if (PQsendQueryPrepared(conn_, name, v.count(), v.pointers(), v.lengths(), v.formats(), 0) != 1)
            fail(conn_, name);
        ++sent_;
        return *this;
    }
    // Sends and reads every answer, then leaves pipeline mode; whether all statements succeeded (a failed
    // one aborts the rest, which PostgreSQL then skips). A failure other than
    // `tolerated` throws.
    bool run(const char* tolerated = nullptr) {
        if (PQpipelineSync(conn_) != 1) fail(conn_, "pipeline sync");
        bool all_ok = true;
        for (int i = 0; i < sent_; ++i) {
            while (PGresult* r = PQgetResult(conn_)) {
                const ExecStatusType status = PQresultStatus(r);
                last_rows_ = PQntuples(r);
                if (status == PGRES_PIPELINE_ABORTED) {
                    PQclear(r);
                    all_ok = false;
                    continue;
                }
                all_ok = consume(conn_, r, "a pipelined statement", tolerated) && all_ok;
            }
        }
        PGresult* sync = PQgetResult(conn_);
        if (sync == nullptr || PQresultStatus(sync) != PGRES_PIPELINE_SYNC) fail(conn_, "pipeline end");
        PQclear(sync);
        if (PQexitPipelineMode(conn_) != 1) fail(conn_, "leaving pipeline mode");
        return all_ok;
    }

    // Rows the last statement returned.
    [[nodiscard]] int last_rows() const noexcept { return last_rows_; }

private:
    PGconn* conn_;
    int sent_ = 0;
    int last_rows_ = 0;
};

}  // namespace idem::bench::pq
