// idem/http/fingerprint.hpp: what makes two requests "the same content".
//
// SHA-256 over the method, the target (path with query) and the body, each
// length-prefixed so no two different requests share a fingerprint:
//
//   auto fp = idem::http::request_fingerprint("POST", "/transfers", body);  // 64 hex characters
#pragma once

#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem::http {

[[nodiscard]] IDEM_API std::string request_fingerprint(std::string_view method, std::string_view target,
                                              std::string_view body);

}  // namespace idem::http
