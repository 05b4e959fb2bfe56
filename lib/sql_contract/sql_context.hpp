// The context the running SQL-store suite tests, set by idem::contract::run_sql.
#pragma once

#include "idem/sql_contract.hpp"

namespace idem::contract {

// The context of the run in progress; std::logic_error outside one.
[[nodiscard]] sql_store_context& current_sql();

}  // namespace idem::contract
