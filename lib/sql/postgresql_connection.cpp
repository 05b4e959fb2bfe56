// Control statements on a PostgreSQL session through its libpq connection:
// exact SQLSTATEs, a COMMIT that PostgreSQL turned into a rollback reported as
// the failure it is, and a store's last statement sent in one pipeline with COMMIT.
#include <soci/postgresql/soci-postgresql.h>
#include <soci/session.h>

#include "sql/fast_path.hpp"
#include "sql/postgresql_native.hpp"
#include "sql/soci_errors.hpp"
#include "sql/sql_connection.hpp"

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

    void finish(deferred_statement& last, bool then_commit) override {
        pg::pipeline p(conn());
        last.queue(p);
        if (then_commit) p.query("COMMIT", "COMMIT");
        try {
            p.run();
        } catch (const store_error&) {
            last.failed(p);
            throw;
        }
        if (then_commit && pg::commit_rolled_back(p.last())) throw pg::rolled_back_error();
    }

    [[nodiscard]] bool can_finish() const noexcept override { return true; }

    [[nodiscard]] bool broken() noexcept override {
        // The session may have reconnected since: look at the connection it has now.
        return session_.get_backend() == nullptr || pg::broken(pg::native_handle(session_));
    }

private:
    PGconn* conn() { return pg::native_handle(session_); }

    soci::session& session_;
    std::string begin_sql_;
};

std::unique_ptr<sql_connection> make_postgresql_connection(soci::session& session, std::string begin_sql) {
    return std::make_unique<postgresql_connection>(session, std::move(begin_sql));
}

void translate_postgresql_error(std::string_view what, soci::session* session) {
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

}  // namespace

void pg::use_native_connections() noexcept {
    provide_native_connection(sql_dialect::postgresql, make_postgresql_connection);
    provide_driver_error_translator(sql_dialect::postgresql, translate_postgresql_error);
}

}  // namespace idem::detail
