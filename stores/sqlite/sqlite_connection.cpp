// Control statements on a SQLite session through its native handle: BEGIN
// IMMEDIATE, COMMIT and ROLLBACK prepared once, errors with exact result codes.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "sql/soci_errors.hpp"
#include "sql/sql_connection.hpp"
#include "sql/sql_dialect.hpp"
#include "sqlite_native.hpp"
#include "sqlite_statements.hpp"
#include "standard_mapping_statements.hpp"
#include "writer_gate.hpp"

namespace idem::detail {
namespace {

class sqlite_connection final : public sql_connection {
public:
    explicit sqlite_connection(soci::session& session) : session_(session) {}
    ~sqlite_connection() override { leave_gate(); }
    sqlite_connection(const sqlite_connection&) = delete;
    sqlite_connection& operator=(const sqlite_connection&) = delete;

    // IMMEDIATE takes the write lock up front: a writer waits (busy timeout)
    // at BEGIN instead of failing at its first write with its reads already done.
    // It waits in the process's line for the file first, so it is woken when the
    // writer before it ends rather than polling for the lock.
    void begin() override {
        enter_gate();
        try {
            run(&statements::begin);
        } catch (...) {
            sqlite::waiting_since(std::nullopt);
            leave_gate();
            throw;
        }
        sqlite::waiting_since(std::nullopt);
    }
    void commit() override { ending(&statements::commit); }
    void rollback() override { ending(&statements::rollback); }

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

    // COMMIT or ROLLBACK; the gate stays held while a transaction is still open
    // (a COMMIT refused as busy, a ROLLBACK that failed), until it ends or the
    // connection goes.
    void ending(sqlite::statement statements::*which) {
        try {
            run(which);
        } catch (...) {
            if (sqlite_api::sqlite3_get_autocommit(sqlite::native_handle(session_)) != 0) leave_gate();
            throw;
        }
        leave_gate();
    }

    void enter_gate() {
        sqlite::database* db = sqlite::native_handle(session_);
        if (settings_db_ != db) {
            settings_db_ = db;
            const sqlite::connection_settings* settings = sqlite::settings_of(db);
            gate_ = settings != nullptr ? settings->gate : nullptr;
            busy_timeout_ = settings != nullptr ? settings->busy_timeout : std::chrono::milliseconds(0);
        }
        if (!gate_ || gate_->held_by_this_thread()) return;
        const auto now = sqlite::writer_gate::clock::now();
        if (!gate_->enter(now + busy_timeout_))
            throw sqlite::error(SQLITE_BUSY, "BEGIN IMMEDIATE (waiting for this process's writers before it)");
        holding_ = true;
        sqlite::waiting_since(now);  // the busy handler, for another process's writer, counts from here
    }

    void leave_gate() noexcept {
        if (!std::exchange(holding_, false)) return;
        gate_->leave();
    }

    soci::session& session_;
    std::optional<statements> statements_;
    // The line for this connection's file, looked up again if the session reconnects.
    sqlite::database* settings_db_ = nullptr;
    std::shared_ptr<sqlite::writer_gate> gate_;
    std::chrono::milliseconds busy_timeout_{0};
    bool holding_ = false;
};

class sqlite_dialect final : public sql_dialect {
public:
    [[nodiscard]] std::string_view soci_backend() const noexcept override { return "sqlite3"; }

    // SQLite transactions are serializable whatever the options say.
    [[nodiscard]] std::string begin_sql(const transaction_options&) const override { return "BEGIN IMMEDIATE"; }

    [[nodiscard]] std::unique_ptr<sql_connection> connect(soci::session& session, std::string) const override {
        return std::make_unique<sqlite_connection>(session);
    }

    [[nodiscard]] const outbox_statements& outbox() const noexcept override { return sqlite::outbox_sql(); }
    [[nodiscard]] const operations_statements& operations() const noexcept override { return sqlite::operations_sql(); }
    [[nodiscard]] const schema_statements& schema() const noexcept override { return sqlite::schema_sql(); }
    // Writers are serialised: a SELECT of mapped rows locks nothing.
    [[nodiscard]] const mapping_statements& mapping() const noexcept override { return mapping_; }

private:
    standard_mapping_statements mapping_{""};

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
