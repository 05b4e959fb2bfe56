// MariaDB's SQL for idem's own tables (the statements interfaces of lib/sql):
// one file a table. Bytes travel as they are (SOCI's mysql backend escapes
// them into the statement's text and reads them back by length). Row locks
// pass over rows other transactions hold (SKIP LOCKED) where PostgreSQL's
// statements do; the statements that read a table beside the rows they lock
// expect READ COMMITTED, the store's level, under which those reads see the
// last committed rows and wait for no lock.
#pragma once

#include "sql/operations_statements.hpp"
#include "sql/outbox_statements.hpp"
#include "sql/schema_statements.hpp"

namespace idem::detail::mariadb {

[[nodiscard]] const outbox_statements& outbox_sql() noexcept;
[[nodiscard]] const operations_statements& operations_sql() noexcept;
[[nodiscard]] const schema_statements& schema_sql() noexcept;

}  // namespace idem::detail::mariadb
