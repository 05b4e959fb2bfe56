// Control statements on a PostgreSQL session through its libpq connection:
// exact SQLSTATEs, a COMMIT that PostgreSQL turned into a rollback reported as
// the failure it is, and a store's last statement sent in one pipeline with COMMIT.
#include <soci/session.h>

#include "sql/fast_path.hpp"
#include "sql/postgresql_native.hpp"
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
        p.run();
        if (then_commit && pg::commit_rolled_back(p.last())) throw pg::rolled_back_error();
    }

    [[nodiscard]] bool broken() noexcept override {
        // The session may have reconnected since: look at the connection it has now.
        return session_.get_backend() == nullptr || pg::broken(pg::native_handle(session_));
    }

private:
    PGconn* conn() { return pg::native_handle(session_); }

    soci::session& session_;
    std::string begin_sql_;
};

}  // namespace

std::unique_ptr<sql_connection> make_postgresql_connection(soci::session& session, std::string begin_sql) {
    return std::make_unique<postgresql_connection>(session, std::move(begin_sql));
}

}  // namespace idem::detail
