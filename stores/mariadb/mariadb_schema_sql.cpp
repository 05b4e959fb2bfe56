// The schema versions table in MariaDB's SQL (see sql/schema_statements.hpp).
// DDL commits as it runs: every migration is a step of its own, its script
// safe to run again (migrations/mariadb). Concurrent migrating processes
// queue on a named lock of the connection (GET_LOCK), one per database, as
// PostgreSQL's advisory lock is: taken before the first step, given back
// after the last.
#include "mariadb_statements.hpp"

namespace idem::detail::mariadb {

const schema_statements& schema_sql() noexcept {
    static const schema_statements statements{
        .transactional_ddl = false,
        // Waits up to 20 s (below the 30 s read timeout the store gives its
        // connections by default), then fails with an error that says so,
        // SQLSTATE 45000: a GET_LOCK that times out answers 0 (NULL on an
        // error), which a plain SELECT would only return, and the migrations
        // would then run beside another process's. An anonymous block (BEGIN
        // NOT ATOMIC, MariaDB 10.1.1) is one statement, sent whole. A lock
        // name is at most 64 characters: databases whose names share their
        // first 48 share a lock, which only queues their migrations together.
        .lock =
            "BEGIN NOT ATOMIC IF COALESCE(GET_LOCK(LEFT(CONCAT('idem_migrations.', DATABASE()), 64), 20), 0) <> 1 "
            "THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'idem: another process held the migration lock "
            "(GET_LOCK idem_migrations.<database>) for 20 s; try again once its migration ended'; END IF; END",
        // Answers 0 or NULL, and fails nothing, when the lock is not this connection's.
        .unlock = "DO RELEASE_LOCK(LEFT(CONCAT('idem_migrations.', DATABASE()), 64))",
        // applied_at is DATETIME (TIMESTAMP ends in 2038), on the store's UTC session clock.
        .create_versions =
            "CREATE TABLE IF NOT EXISTS idem_schema_versions (version INT NOT NULL PRIMARY KEY, "
            "name VARCHAR(255) NOT NULL, applied_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP) "
            "ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin",
        .applied_versions = "SELECT version FROM idem_schema_versions",
        .record_version = "INSERT INTO idem_schema_versions (version, name) VALUES (:version, :name)",
    };
    return statements;
}

}  // namespace idem::detail::mariadb
