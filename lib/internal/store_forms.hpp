// The URL forms registered with the store registry (lib/store_registry.cpp),
// for database_url::parse and database_url_forms (lib/database_url.cpp).
#pragma once

#include <string>
#include <vector>

#include "idem/store_registry.hpp"

namespace idem::detail {

// Every registered form, in the order the stores registered (a copy: a store
// library may load and register meanwhile).
[[nodiscard]] std::vector<store_url_form> registered_forms();

// "; use " and the accepted forms, the end of a message refusing a database
// name (or that the program links no store, when it links none).
[[nodiscard]] std::string use_accepted_forms();

}  // namespace idem::detail
