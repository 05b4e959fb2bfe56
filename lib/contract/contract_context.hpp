// The context the running suite tests, set by idem::contract::run.
#pragma once

#include "idem/contract.hpp"

namespace idem::contract {

// The context of the run in progress; std::logic_error outside one.
[[nodiscard]] store_context& current();

}  // namespace idem::contract
