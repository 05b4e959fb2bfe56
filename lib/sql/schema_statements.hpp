// The statements of idem's schema versions table (idem_schema_versions), as
// one dialect writes them, and how its DDL behaves. migrations.cpp decides
// the order of the work; each store's dialect fills this in its own SQL
// (stores/<dialect>/<dialect>_schema_sql.cpp).
#pragma once

#include <string>

namespace idem::detail {

struct schema_statements {
    // Whether DDL runs inside a transaction and rolls back with it
    // (SQLite, PostgreSQL). Where it commits implicitly (MySQL, MariaDB),
    // every migration is a step of its own, recorded as it ends; its script
    // must be safe to run again (IF NOT EXISTS), since a step that failed
    // half way, or whose record was lost, runs again.
    bool transactional_ddl = true;
    // Optional: queues concurrent migrations. With transactional DDL, run
    // first in the migration's transaction and held until it ends; else a
    // lock of the connection's own, taken before the first step and given
    // back by `unlock` after the last (or a failure).
    std::string lock;
    std::string unlock;
    // Creates the table unless it exists.
    std::string create_versions;
    // Every applied version: one integer a row.
    std::string applied_versions;
    // :version :name.
    std::string record_version;
};

}  // namespace idem::detail
