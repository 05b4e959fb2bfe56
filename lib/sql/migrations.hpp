// The migration runner the SQL stores share: applies the embedded scripts of a
// backend (migrations/<backend>/NNNN_name.sql, compiled in by
// embed_migrations.py) once, in order, and records them in idem_schema_versions.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/export.hpp"
#include "idem/transaction_runner.hpp"

namespace idem::detail {

struct IDEM_API embedded_migration {
    int version;            // NNNN
    std::string_view name;  // "NNNN_name", the file name without .sql
    std::string_view sql;
};

// Runs one script (several statements) inside the migration's transaction.
using script_executor = std::function<void(unit_of_work& tx, std::string_view sql)>;

// Applies the pending migrations in one transaction and returns their names,
// in order (empty when the schema is current). Safe from several processes at
// once: SQLite serialises the writers (BEGIN IMMEDIATE), PostgreSQL takes a
// transaction-level advisory lock first. A database whose schema is newer than
// `migrations` gives store_error(schema).
[[nodiscard]] IDEM_API std::vector<std::string> apply_migrations(transaction_runner& runner,
                                                                 std::span<const embedded_migration> migrations,
                                                                 const script_executor& execute_script);

}  // namespace idem::detail
