// Turns SOCI's exceptions into idem::store_error without their context, which
// can quote bound values (keys).
#pragma once

#include <string_view>

#include "idem/export.hpp"
#include "idem/transaction.hpp"

namespace soci {
class session;
}

namespace idem::detail {

// Call inside a catch block: rethrows a soci::soci_error as idem::store_error
// naming `what`; anything else is rethrown unchanged. With the session the
// statement ran on, a PostgreSQL connection that broke is connection_lost.
[[noreturn]] IDEM_API void rethrow_soci_as_store_error(std::string_view what, soci::session* session = nullptr);

// A driver's own reading of its SOCI errors (SQLSTATEs, broken connections),
// provided by the library that links the driver: called inside the catch
// block, it throws the store_error when it recognises the exception and
// returns otherwise.
using driver_error_translator = void (*)(std::string_view what, soci::session* session);
IDEM_API void provide_driver_error_translator(sql_dialect dialect, driver_error_translator translator) noexcept;

}  // namespace idem::detail
