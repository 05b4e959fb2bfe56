// The MariaDB dialect: how its transactions begin, its driver's errors as
// idem's failures, and its SQL for idem's own tables (mariadb_*_sql.cpp).
#include <soci/mysql/soci-mysql.h>
#include <soci/session.h>

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "idem/error.hpp"
#include "mariadb_deferred.hpp"
#include "mariadb_mapping_sql.hpp"
#include "mariadb_native.hpp"
#include "mariadb_pipeline.hpp"
#include "mariadb_statements.hpp"
#include "sql/soci_errors.hpp"
#include "sql/sql_connection.hpp"
#include "sql/sql_dialect.hpp"

namespace idem::detail {
namespace {

// Error codes of the server (ER_*) and of the client library (CR_*).
constexpr unsigned lock_wait_timeout = 1205, deadlock = 1213, duplicate_key = 1062, read_only = 1290,
                   read_only_transaction = 1792, read_only_mode = 1836, packet_too_large = 1153, server_gone = 2006,
                   server_lost = 2013, connection_error = 2002, host_error = 2003, connection_killed = 1927,
                   shutdown_in_progress = 1053, server_shutdown = 4031, out_of_sync = 2014, query_interrupted = 1317,
                   wsrep_not_ready = 1047, error_during_commit = 1180;

// The connection is gone: the server ends its open transaction by itself.
bool connection_gone(unsigned code) noexcept {
    switch (code) {
        case server_gone:
        case server_lost:
        case connection_error:
        case host_error:
        case connection_killed:
        case shutdown_in_progress:
        case server_shutdown:
        case out_of_sync: return true;
        default: return false;
    }
}

// MariaDB names no isolation level in START TRANSACTION: the level of the
// next transaction is set by a statement of its own before it, unless the
// session's own level (@@tx_isolation) is already the one wanted.
struct level_names {
    isolation_level level;
    const char* set_transaction;
    const char* variable;
};
constexpr level_names levels[] = {
    {isolation_level::read_committed, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "READ-COMMITTED"},
    {isolation_level::repeatable_read, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "REPEATABLE-READ"},
    {isolation_level::serializable, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SERIALIZABLE"},
};

std::string isolation_sql(isolation_level level) {
    for (const level_names& l : levels)
        if (l.level == level) return l.set_transaction;
    return {};  // database_default
}

// Control statements through SOCI, the level first when the session is not at
// it; and the fast path's writes (fast_path.hpp) with COMMIT in one compound statement.
class mariadb_connection final : public sql_connection {
public:
    mariadb_connection(soci::session& session, std::string isolation)
        : session_(session), isolation_(std::move(isolation)) {}

    void begin() override {
        if (!isolation_.empty() && !session_at_level()) execute(isolation_, "SET TRANSACTION");
        execute(begin_, "START TRANSACTION");
    }
    void commit() override { execute("COMMIT", "COMMIT"); }
    void rollback() override {
        try {
            execute("ROLLBACK", "ROLLBACK");
        } catch (const store_error& e) {
            // The server rolled the transaction back itself (a deadlock's victim; on
            // Galera, a COMMIT that failed certification or a transaction a replicated
            // one aborted), and the ROLLBACK reports that once more: it is rolled back.
            if (e.native_code() != std::to_string(deadlock)) throw;
        }
    }
    void execute(const std::string& sql, std::string_view what) override {
        try {
            session_ << sql;
        } catch (const soci::mysql_soci_error& e) {
            broken_ = broken_ || connection_gone(e.err_num_);
            rethrow_soci_as_store_error(what, &session_);
        } catch (...) {
            rethrow_soci_as_store_error(what, &session_);
        }
    }
    [[nodiscard]] const std::string& begin_sql() const noexcept override { return begin_; }
    // A ROLLBACK (or another control statement) found the connection gone.
    [[nodiscard]] bool broken() noexcept override { return broken_; }

    [[nodiscard]] int socket() noexcept override {
        return session_.get_backend() == nullptr ? -1
                                                 : static_cast<int>(mysql_get_socket(mariadb::native_handle(session_)));
    }

    // The fast path once the session's level is known (a transaction on this
    // connection began the slow way and read it), so that the held-back BEGIN
    // is START TRANSACTION alone.
    [[nodiscard]] bool can_finish() const noexcept override { return isolation_.empty() || at_level_ == true; }

    // The deferred writes, and COMMIT after them when `then_commit`, in one
    // compound statement (BEGIN NOT ATOMIC … END, one request): the server ends
    // it at the first statement that fails, so a write refused (a duplicate
    // key: the record taken meanwhile; a lock wait) leaves the transaction open
    // and uncommitted, for the runner to roll back. A connection lost meanwhile
    // is connection_lost, which the runner takes for a COMMIT in doubt.
    void finish(std::span<const std::unique_ptr<deferred_statement>> statements, bool then_commit) override {
        if (statements.empty()) {
            if (then_commit) commit();
            return;
        }
        std::string body;
        const mariadb::deferred_write* first = nullptr;
        for (const std::unique_ptr<deferred_statement>& s : statements) {
            const auto* write = dynamic_cast<const mariadb::deferred_write*>(s.get());
            if (write == nullptr)  // MariaDB's outbox SQL has no insert_at_commit: nothing else defers
                throw std::logic_error("idem: a statement MariaDB's connection cannot send was deferred");
            if (first == nullptr) first = write;
            for (const std::string& statement : write->statements) body += statement + "; ";
        }
        if (then_commit) body += "COMMIT; ";
        const std::string block = "BEGIN NOT ATOMIC " + body + "END";
        mariadb::pipeline p(mariadb::native_handle(session_), {block});
        if (const unsigned code = p.error(); code != 0) {
            broken_ = broken_ || connection_gone(code);
            // Only the record's INSERT can meet a duplicate: the tombstone's updates one.
            if (code == duplicate_key && first != nullptr && !first->lost_race.empty())
                throw store_error(store_failure::lost_race, first->lost_race, std::to_string(code));
            mariadb::raise(code, p.message(), std::string(first->what) + (then_commit ? ", then COMMIT" : ""));
        }
    }

private:
    // Whether the session's own level is the one every transaction here wants,
    // read once: idem opens its sessions at READ COMMITTED, the level a unit of
    // work names by default, and then each transaction is one round trip
    // shorter. An application's session lent to idem (database::borrow) is read
    // when lent; one whose level changes while lent keeps the level it had.
    bool session_at_level() {
        if (!at_level_) {
            std::string level;
            try {
                session_ << "SELECT @@tx_isolation", soci::into(level);
            } catch (...) {
                rethrow_soci_as_store_error("reading the isolation level", &session_);
            }
            at_level_ = false;
            for (const level_names& l : levels)
                if (isolation_ == l.set_transaction) at_level_ = level == l.variable;
        }
        return *at_level_;
    }

    soci::session& session_;
    std::string isolation_;
    bool broken_ = false;
    std::optional<bool> at_level_;
    const std::string begin_ = "START TRANSACTION";
};

class mariadb_dialect final : public sql_dialect {
public:
    [[nodiscard]] std::string_view soci_backend() const noexcept override { return "mysql"; }
    [[nodiscard]] std::string begin_sql(const transaction_options& options) const override {
        return isolation_sql(options.isolation);
    }
    [[nodiscard]] std::unique_ptr<sql_connection> connect(soci::session& session,
                                                          std::string isolation) const override {
        return std::make_unique<mariadb_connection>(session, std::move(isolation));
    }
    void translate_error(std::string_view what, soci::session*) const override {
        try {
            throw;
        } catch (const soci::mysql_soci_error& e) {
            mariadb::raise(e.err_num_, e.get_error_message(), what);
        } catch (...) {
            // Not MariaDB's: the generic translation follows.
        }
    }
    [[nodiscard]] const outbox_statements& outbox() const noexcept override { return mariadb::outbox_sql(); }
    [[nodiscard]] const operations_statements& operations() const noexcept override {
        return mariadb::operations_sql();
    }
    [[nodiscard]] const schema_statements& schema() const noexcept override { return mariadb::schema_sql(); }
    [[nodiscard]] const mapping_statements& mapping() const noexcept override { return mapping_; }

private:
    mariadb::mapping_sql mapping_;
};

const mariadb_dialect the_dialect;

}  // namespace

void mariadb::raise(unsigned code, std::string_view message, std::string_view what) {
    const std::string text = "idem: " + std::string(what) + " failed: " + std::string(message);
    const std::string native = std::to_string(code);
    if (connection_gone(code)) throw store_error(store_failure::connection_lost, text, native);
    switch (code) {
        case deadlock: throw store_error(store_failure::conflict, text, native);
        case lock_wait_timeout:
        case query_interrupted: throw store_error(store_failure::timeout, text, native);
        // A duplicate key is a constraint, as on the other databases: the
        // record's own insert, where a duplicate is a concurrent transaction
        // that committed the same record first, says lost_race itself
        // (mariadb_records.cpp), and nothing else is run again.
        case duplicate_key: throw store_error(store_failure::constraint, text, native);
        // A read-only server is a replica, or a primary being demoted: the
        // session is dropped and the next attempt finds the writable one.
        case read_only:
        case read_only_transaction:
        case read_only_mode:
        // A Galera node outside the primary component (it lost quorum, or is
        // still joining) answers every statement so (1047), or a statement
        // that was replicating as it lost it (1180): the same.
        case wsrep_not_ready:
        case error_during_commit: throw store_error(store_failure::connection_lost, text, native);
        case packet_too_large:
            throw store_error(store_failure::constraint,
                              text + " (larger than the server's max_allowed_packet: raise it, or send less)", native);
        default: break;
    }
    // Integrity and data errors (1048 NULL, 1406 too long, 1451/1452 foreign keys, 3819 check).
    if (code == 1048 || code == 1406 || code == 1451 || code == 1452 || code == 3819 || code == 1264 || code == 1366)
        throw store_error(store_failure::constraint, text, native);
    if (code == 1146) throw store_error(store_failure::schema, text, native);  // no such table
    throw store_error(store_failure::other, text, native);
}

const sql_dialect& mariadb::dialect() noexcept {
    return the_dialect;
}

void mariadb::install_dialect() noexcept {
    register_dialect(the_dialect);
}

}  // namespace idem::detail
