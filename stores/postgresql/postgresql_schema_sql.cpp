// The schema versions table in PostgreSQL's SQL (see sql/schema_statements.hpp).
// DDL is transactional. Concurrent CREATE TABLE IF NOT EXISTS can fail, so
// every migrating process queues on a transaction-level advisory lock first
// (its key: "idem" in ASCII).
#include "postgresql_statements.hpp"

namespace idem::detail::pg {

const schema_statements& schema_sql() noexcept {
    static const schema_statements statements{
        .transactional_ddl = true,
        .lock = "SELECT pg_advisory_xact_lock(1768187245)",
        .unlock = {},
        .create_versions =
            "CREATE TABLE IF NOT EXISTS idem_schema_versions (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
        .applied_versions = "SELECT version FROM idem_schema_versions",
        .record_version = "INSERT INTO idem_schema_versions (version, name) VALUES (:version, :name)",
    };
    return statements;
}

}  // namespace idem::detail::pg
