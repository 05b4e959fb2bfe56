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
#include "sql/schema_statements.hpp"

namespace idem::detail {

struct IDEM_API embedded_migration {
    int version;            // NNNN
    std::string_view name;  // "NNNN_name", the file name without .sql
    std::string_view sql;
};

// Runs one script (several statements) inside the migration's transaction.
using script_executor = std::function<void(unit_of_work& tx, std::string_view sql)>;

// Applies the pending migrations and returns their names, in order (empty
// when the schema is current), with the SQL of `statements`, by default the
// dialect's of the runner's session. Where DDL is transactional, in one
// transaction, all or none; where it commits as it runs, each migration a
// step of its own, recorded as it ends, so a failed one runs again next time
// (schema_statements::transactional_ddl). Safe from several processes at once
// (the dialect's lock, or its serialised writers). A database whose schema is
// newer than `migrations` gives store_error(schema).
[[nodiscard]] IDEM_API std::vector<std::string> apply_migrations(transaction_runner& runner,
                                                                 std::span<const embedded_migration> migrations,
                                                                 const script_executor& execute_script,
                                                                 const schema_statements* statements = nullptr);

}  // namespace idem::detail
