// Control statements on a SQLite session through its native handle: BEGIN
// IMMEDIATE, COMMIT and ROLLBACK prepared once, errors with exact result codes.
#include <optional>
#include <string>

#include "sql/soci_errors.hpp"
#include "sql/sql_connection.hpp"
#include "sql/sql_dialect.hpp"
#include "sqlite_native.hpp"

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

class sqlite_dialect final : public sql_dialect {
public:
    [[nodiscard]] std::string_view soci_backend() const noexcept override { return "sqlite3"; }

    // SQLite transactions are serializable whatever the options say.
    [[nodiscard]] std::string begin_sql(const transaction_options&) const override { return "BEGIN IMMEDIATE"; }

    [[nodiscard]] std::unique_ptr<sql_connection> connect(soci::session& session, std::string) const override {
        return std::make_unique<sqlite_connection>(session);
    }

    [[nodiscard]] std::string_view clock_ms() const noexcept override {
        return "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
    }

    // SOCI's SQLite error keeps the result code: it tells a busy database and a
    // constraint apart. The message is SQLite's generic text for the code.
    void translate_error(std::string_view what, soci::session*) const override {
        try {
            throw;
        } catch (const soci::sqlite3_soci_error& e) {
            throw sqlite::error(e.result(), std::string(what) + " failed");
        } catch (...) {
            // Not SQLite's: the generic translation follows.
        }
    }
};

const sqlite_dialect the_dialect;

}  // namespace

const sql_dialect& sqlite::dialect() noexcept {
    return the_dialect;
}

void sqlite::install_dialect() noexcept {
    register_dialect(the_dialect);
}

}  // namespace idem::detail
