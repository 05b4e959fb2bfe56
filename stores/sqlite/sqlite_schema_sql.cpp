// The schema versions table in SQLite's SQL (see sql/schema_statements.hpp).
// DDL is transactional, and BEGIN IMMEDIATE serialises concurrent migrations.
#include "sqlite_statements.hpp"

namespace idem::detail::sqlite {

const schema_statements& schema_sql() noexcept {
    static const schema_statements statements{
        .transactional_ddl = true,
        .lock = {},
        .unlock = {},
        .create_versions =
            "CREATE TABLE IF NOT EXISTS idem_schema_versions (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
        .applied_versions = "SELECT version FROM idem_schema_versions",
        .record_version = "INSERT INTO idem_schema_versions (version, name) VALUES (:version, :name)",
    };
    return statements;
}

}  // namespace idem::detail::sqlite
