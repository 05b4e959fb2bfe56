// idem/keys.hpp: deterministic idempotency keys built from business ids.
//
// A message handler or job has no client-chosen key to retry with; derive one
// from the ids that make the work unique, and send the same key downstream:
//
//   auto key  = idem::keys::derive("refund", {order_id, refund_id});  // "6:refund|7:order-1|3:r-2"
//   auto uuid = idem::keys::to_uuid_v5("refund", {order_id, refund_id});
//   auto msg  = idem::keys::from_message(message_id, "billing.invoice-created");
//   bool ok   = idem::keys::is_valid(header_value);
//
// Every derived key is a valid Idempotency-Key header value.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem::keys {

// "{n}:{operation}|{n}:{id}|...", n the UTF-8 byte length; when that is not a
// valid key, "h:" + unpadded base64url(SHA-256(it)). Operation non-empty, ids may be empty.
[[nodiscard]] IDEM_API std::string derive(std::string_view operation, std::span<const std::string_view> ids);
[[nodiscard]] IDEM_API std::string derive(std::string_view operation, std::initializer_list<std::string_view> ids = {});

// derive("message", consumer, message_id): two consumers never share a key.
[[nodiscard]] IDEM_API std::string from_message(std::string_view message_id, std::string_view consumer);

// RFC 9562 UUIDv5 of derive(operation, ids) in idem's namespace; lowercase canonical text.
[[nodiscard]] IDEM_API std::string to_uuid_v5(std::string_view operation, std::span<const std::string_view> ids);
[[nodiscard]] IDEM_API std::string to_uuid_v5(std::string_view operation,
                                              std::initializer_list<std::string_view> ids = {});

// 1 to 255 characters, each printable ASCII (0x21..0x7E) except '"' and '\'.
[[nodiscard]] IDEM_API bool is_valid(std::string_view key) noexcept;

inline constexpr std::string_view uuid_namespace = "9c8fbd17-da5f-4f32-a4bf-651721368d5e";

}  // namespace idem::keys
