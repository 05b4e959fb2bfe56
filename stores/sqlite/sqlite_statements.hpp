// SQLite's SQL for idem's own tables (the statements interfaces of lib/sql):
// one file a table. Writers are serialised (BEGIN IMMEDIATE), so no
// statement locks rows or passes over rows another transaction holds, and
// bytes travel as they are.
#pragma once

#include "sql/operations_statements.hpp"
#include "sql/outbox_statements.hpp"
#include "sql/schema_statements.hpp"

namespace idem::detail::sqlite {

[[nodiscard]] const outbox_statements& outbox_sql() noexcept;
[[nodiscard]] const operations_statements& operations_sql() noexcept;
[[nodiscard]] const schema_statements& schema_sql() noexcept;

}  // namespace idem::detail::sqlite
