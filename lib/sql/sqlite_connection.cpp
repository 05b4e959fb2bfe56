// Control statements on a SQLite session through its native handle: BEGIN
// IMMEDIATE, COMMIT and ROLLBACK prepared once, errors with exact result codes.
#include <optional>
#include <string>

#include "sql/soci_errors.hpp"
#include "sql/sql_connection.hpp"
#include "sql/sqlite_native.hpp"

namespace idem::detail {
namespace {

class sqlite_connection final : public sql_connection {
public:
    explicit sqlite_connection(soci::session& session) : session_(session) {}

    // IMMEDIATE takes the write lock up front: a writer waits (busy timeout)
    // at BEGIN instead of failing at its first write with its reads already done.
    void begin() override { run(&statements::begin); }
    void commit() override { run(&statements::commit); }
    void rollback() override { run(&statements::rollback); }

    void execute(const std::string& sql, std::string_view what) override {
        sqlite::execute(sqlite::native_handle(session_), sql.c_str(), what);
    }

    [[nodiscard]] const std::string& begin_sql() const noexcept override {
        static const std::string immediate = "BEGIN IMMEDIATE";
        return immediate;
    }

private:
    struct statements {
        explicit statements(sqlite::database* db)
            : begin(db, "BEGIN IMMEDIATE", "BEGIN IMMEDIATE"),
              commit(db, "COMMIT", "COMMIT"),
              rollback(db, "ROLLBACK", "ROLLBACK") {}
        sqlite::statement begin, commit, rollback;
    };

    void run(sqlite::statement statements::*which) {
        // The session may have reconnected since: prepare on the handle it has now.
        sqlite::database* db = sqlite::native_handle(session_);
        if (!statements_ || statements_->begin.db() != db) {
            statements_.reset();
            statements_.emplace(db);
        }
        sqlite::statement_use use((*statements_).*which);
        (void)use->step();
    }

    soci::session& session_;
    std::optional<statements> statements_;
};

// Its BEGIN is always BEGIN IMMEDIATE, as the runner asks.
std::unique_ptr<sql_connection> make_sqlite_connection(soci::session& session, std::string /*begin_sql*/) {
    return std::make_unique<sqlite_connection>(session);
}

// SOCI's SQLite error keeps the result code: it tells a busy database and a
// constraint apart. The message is SQLite's generic text for the code.
void translate_sqlite_error(std::string_view what, soci::session*) {
    try {
        throw;
    } catch (const soci::sqlite3_soci_error& e) {
        throw sqlite::error(e.result(), std::string(what) + " failed");
    } catch (...) {
        // Not SQLite's: the generic translation follows.
    }
}

}  // namespace

void sqlite::use_native_connections() noexcept {
    provide_native_connection(sql_dialect::sqlite, make_sqlite_connection);
    provide_driver_error_translator(sql_dialect::sqlite, translate_sqlite_error);
}

}  // namespace idem::detail
