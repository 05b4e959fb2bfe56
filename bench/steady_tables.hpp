// The steady-state tables, filled as years of use would leave them (100,000
// accounts, a ledger line and a completed record per past transfer, `rows` of
// each): made by sqlite_steady.cpp and postgresql_steady.cpp, and shared with
// the mapped objects' benchmark (mapping_steady.cpp). SQLite needs a new file
// with idem's schema; PostgreSQL drops and refills the tables.
#pragma once

#include <cstddef>

namespace soci {
class session;
}

namespace idem::bench {

void prefill_sqlite_steady(soci::session& s, std::size_t rows);
void prefill_postgresql_steady(soci::session& s, std::size_t rows);

}  // namespace idem::bench
