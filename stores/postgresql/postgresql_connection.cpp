// Control statements on a PostgreSQL session through its libpq connection:
// exact SQLSTATEs, a COMMIT that PostgreSQL turned into a rollback reported as
// the failure it is, and a store's last statement sent in one pipeline with COMMIT.
#include <soci/postgresql/soci-postgresql.h>
#include <soci/session.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "postgresql_native.hpp"
#include "postgresql_statements.hpp"
#include "sql/fast_path.hpp"
#include "sql/soci_errors.hpp"
#include "sql/sql_connection.hpp"
#include "sql/sql_dialect.hpp"
#include "standard_mapping_statements.hpp"

namespace idem::detail {
namespace {

class postgresql_connection final : public sql_connection {
public:
    postgresql_connection(soci::session& session, std::string begin_sql)
        : session_(session), begin_sql_(std::move(begin_sql)) {}

    void begin() override { (void)pg::execute(conn(), begin_sql_.c_str(), "BEGIN"); }

    void commit() override {
        if (pg::commit_rolled_back(pg::execute(conn(), "COMMIT", "COMMIT"))) throw pg::rolled_back_error();
    }

    void rollback() override { (void)pg::execute(conn(), "ROLLBACK", "ROLLBACK"); }

    void execute(const std::string& sql, std::string_view what) override {
        (void)pg::execute(conn(), sql.c_str(), what);
    }

    [[nodiscard]] const std::string& begin_sql() const noexcept override { return begin_sql_; }

    void finish(std::span<const std::unique_ptr<deferred_statement>> statements, bool then_commit) override {
        pg::pipeline p(conn());
        ++pipelines_;
        std::vector<std::unique_ptr<pg::parameters>> values;  // what the queued statements point into
        pg::deferred* store_statement = nullptr;
        for (const std::unique_ptr<deferred_statement>& s : statements) {
            if (auto* own = dynamic_cast<pg::deferred*>(s.get())) {
                own->queue(p);
                if (store_statement == nullptr) store_statement = own;
            } else {
                queue(p, dynamic_cast<const deferred_sql&>(*s),
                      values.emplace_back(std::make_unique<pg::parameters>()));
            }
        }
        // A store's statement knows how its store sends COMMIT (prepared, on this connection).
        if (then_commit) {
            if (store_statement != nullptr)
                store_statement->queue_commit(p);
            else
                p.query("COMMIT", "COMMIT");
        }
        try {
            p.run();
        } catch (const store_error&) {
            for (const std::unique_ptr<deferred_statement>& s : statements)
                if (auto* own = dynamic_cast<pg::deferred*>(s.get())) own->failed(p);
            throw;
        }
        if (then_commit && pg::commit_rolled_back(p.last())) throw pg::rolled_back_error();
    }

    [[nodiscard]] bool can_finish() const noexcept override { return true; }

    [[nodiscard]] bool broken() noexcept override {
        // The session may have reconnected since: look at the connection it has now.
        return session_.get_backend() == nullptr || pg::broken(pg::native_handle(session_));
    }

    [[nodiscard]] int socket() noexcept override {
        return session_.get_backend() == nullptr ? -1 : PQsocket(pg::native_handle(session_));
    }

private:
    PGconn* conn() { return pg::native_handle(session_); }

    // Queues one of idem's own statements, prepared on this connection the first
    // time when it may be kept (see deferred_sql::kept).
    void queue(pg::pipeline& p, const deferred_sql& statement, std::unique_ptr<pg::parameters>& values) {
        for (const deferred_sql::value& v : statement.values) {
            if (const auto* bytes = std::get_if<std::string>(&v))
                values->bytes(*bytes);
            else if (const auto* number = std::get_if<std::int64_t>(&v))
                values->int8(*number);
            else
                values->null();
        }
        if (!statement.kept) {
            const pg::statement_text text{statement.sql, {}, statement.what};
            return p.execute(text, *values);
        }
        kept_statement& kept = kept_statement_for(statement);
        // Prepared once, ahead of its first execution, however many this pipeline holds.
        if (!kept.statement.prepared && kept.prepared_in != pipelines_) {
            p.prepare(kept.statement.name, kept.text, &kept.statement.prepared);
            kept.prepared_in = pipelines_;
        }
        p.execute(kept.statement.name, kept.text, *values);
    }

    struct kept_statement {
        pg::statement_text text;
        pg::prepared_statement statement;
        std::uint64_t prepared_in = 0;  // the pipeline (see pipelines_) that queued its PREPARE last
    };

    // The statements of this connection as the server has it now: a new
    // connection (the session reconnected) has none of them prepared.
    kept_statement& kept_statement_for(const deferred_sql& statement) {
        PGconn* now = conn();
        const int pid = PQbackendPID(now);
        if (now != kept_on_ || pid != kept_pid_) {
            kept_.clear();
            kept_on_ = now;
            kept_pid_ = pid;
        }
        std::unique_ptr<kept_statement>& slot = kept_[statement.sql];
        if (!slot) {
            if (names_.empty()) names_ = pg::statement_names();
            slot = std::make_unique<kept_statement>();
            slot->text = {statement.sql, {}, statement.what};
            slot->statement = {&slot->text, names_ + std::to_string(kept_.size()), false};
        }
        return *slot;
    }

    soci::session& session_;
    std::string begin_sql_;
    std::unordered_map<const char*, std::unique_ptr<kept_statement>> kept_;
    PGconn* kept_on_ = nullptr;
    int kept_pid_ = 0;
    std::string names_;
    std::uint64_t pipelines_ = 0;  // counts finish()'s pipelines
};

std::string begin_at(isolation_level level) {
    switch (level) {
        case isolation_level::read_committed: return "BEGIN ISOLATION LEVEL READ COMMITTED";
        case isolation_level::repeatable_read: return "BEGIN ISOLATION LEVEL REPEATABLE READ";
        case isolation_level::serializable: return "BEGIN ISOLATION LEVEL SERIALIZABLE";
        case isolation_level::database_default: break;
    }
    return "BEGIN";
}

class postgresql_dialect final : public sql_dialect {
public:
    [[nodiscard]] std::string_view soci_backend() const noexcept override { return "postgresql"; }

    [[nodiscard]] std::string begin_sql(const transaction_options& options) const override {
        return begin_at(options.isolation);
    }

    [[nodiscard]] std::unique_ptr<sql_connection> connect(soci::session& session,
                                                          std::string begin_sql) const override {
        return std::make_unique<postgresql_connection>(session, std::move(begin_sql));
    }

    void translate_error(std::string_view what, soci::session* session) const override {
        try {
            throw;
        } catch (const soci::postgresql_soci_error& e) {
            // SOCI keeps the SQLSTATE (blank when libpq had none, as for a dropped connection).
            std::string sqlstate = e.sqlstate();
            if (sqlstate.find_first_not_of(' ') == std::string::npos) sqlstate.clear();
            const PGconn* conn = nullptr;
            if (session != nullptr && session->get_backend() != nullptr) conn = pg::native_handle(*session);
            if (!sqlstate.empty() || conn != nullptr) throw pg::error(conn, sqlstate, what);
            // Otherwise SOCI's category says enough: the generic translation follows.
        } catch (...) {
            // Not PostgreSQL's: the generic translation follows.
        }
    }

    [[nodiscard]] bool bytes_as_hex() const noexcept override { return true; }
    [[nodiscard]] const outbox_statements& outbox() const noexcept override { return pg::outbox_sql(); }
    [[nodiscard]] const operations_statements& operations() const noexcept override { return pg::operations_sql(); }
    [[nodiscard]] const schema_statements& schema() const noexcept override { return pg::schema_sql(); }
    // Under READ COMMITTED a row read FOR UPDATE cannot change before COMMIT:
    // a concurrent writer waits, then sees what this transaction wrote.
    [[nodiscard]] const mapping_statements& mapping() const noexcept override { return mapping_; }

private:
    standard_mapping_statements mapping_{" FOR UPDATE"};
};

const postgresql_dialect the_dialect;

}  // namespace

const sql_dialect& pg::dialect() noexcept {
    return the_dialect;
}

void pg::install_dialect() noexcept {
    register_dialect(the_dialect);
}

}  // namespace idem::detail
