// idem/http/fingerprint.hpp: what makes two requests "the same content".
//
// SHA-256 over the method, the target (path with query) and the body, each
// length-prefixed so no two different requests share a fingerprint:
//
//   auto fp = idem::http::request_fingerprint("POST", "/transfers", body);  // 64 hex characters
//   auto mp = idem::http::request_fingerprint("POST", "/uploads", "", parts);  // a parsed multipart body
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "idem/export.hpp"
#include "idem/http/message.hpp"

namespace idem::http {

[[nodiscard]] IDEM_API std::string request_fingerprint(std::string_view method, std::string_view target,
                                                       std::string_view body);
// The same with the parts of a multipart body (name, filename, content type and content
// of each, in order), so the boundary a client picked does not matter. Without parts it
// equals the overload above.
[[nodiscard]] IDEM_API std::string request_fingerprint(std::string_view method, std::string_view target,
                                                       std::string_view body, std::span<const form_part> parts);

}  // namespace idem::http
