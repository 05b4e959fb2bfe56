// PostgreSQL's SQL for idem's own tables (the statements interfaces of
// lib/sql): one file a table. Bytes travel as hex text (SOCI binds text
// parameters, which stop at a NUL), decoded and encoded by the statements.
#pragma once

#include "sql/operations_statements.hpp"
#include "sql/outbox_statements.hpp"
#include "sql/schema_statements.hpp"

namespace idem::detail::pg {

[[nodiscard]] const outbox_statements& outbox_sql() noexcept;
[[nodiscard]] const operations_statements& operations_sql() noexcept;
[[nodiscard]] const schema_statements& schema_sql() noexcept;

}  // namespace idem::detail::pg
