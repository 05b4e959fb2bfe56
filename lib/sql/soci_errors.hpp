// Turns SOCI's exceptions into idem::store_error without their context, which
// can quote bound values (keys).
#pragma once

#include <string_view>

namespace idem::detail {

// Call inside a catch block: rethrows a soci::soci_error as idem::store_error
// naming `what`; anything else is rethrown unchanged.
[[noreturn]] void rethrow_soci_as_store_error(std::string_view what);

}  // namespace idem::detail
