// Turns SOCI's exceptions into idem::store_error without their context, which
// can quote bound values (keys).
#pragma once

#include <string_view>

#include "idem/export.hpp"

namespace soci {
class session;
}

namespace idem::detail {

// Call inside a catch block: rethrows a soci::soci_error as idem::store_error
// naming `what`; anything else is rethrown unchanged. With the session the
// statement ran on, a PostgreSQL connection that broke is connection_lost.
// The registered dialects read their driver's exceptions first (sql_dialect.hpp).
[[noreturn]] IDEM_API void rethrow_soci_as_store_error(std::string_view what, soci::session* session = nullptr);

}  // namespace idem::detail
