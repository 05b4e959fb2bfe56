// idem/webhook.hpp: dedupe provider webhooks by their event id, safely.
//
// Providers deliver at least once and send no Idempotency-Key: the event id is
// the identity. Verify the signature over the exact bytes received *before*
// claiming the id, or a forged request turns the real delivery into a duplicate:
//
//   if (!idem::webhook::signature_matches(secret, raw_body, req.header("X-Signature")))
//       return unauthorized();
//   auto key = idem::webhook::event_key("payments-provider", event.id, idem::scope::custom("account", acct));
//   exec.execute(tx, key, idem::webhook::fingerprint, {}, apply_event, codec);  // once per event
#pragma once

#include <string>
#include <string_view>

#include "idem/export.hpp"
#include "idem/record_key.hpp"

namespace idem::webhook {

// Constant: the event id is authoritative, so a redelivery serialized
// differently is still a duplicate, never a key_reused.
inline constexpr std::string_view fingerprint = "event";

// Lowercase hex HMAC-SHA256 of `body` under `secret`: what a provider sends.
[[nodiscard]] IDEM_API std::string hmac_sha256_hex(std::string_view secret, std::string_view body);

// Whether `signature_hex` (hex, either case) is the HMAC-SHA256 of `body` under
// `secret`; compared in constant time. A malformed signature is simply false.
[[nodiscard]] IDEM_API bool signature_matches(std::string_view secret, std::string_view body,
                                     std::string_view signature_hex) noexcept;

// Namespace "webhook:{provider}", key keys::from_message(event_id, provider).
[[nodiscard]] IDEM_API record_key event_key(std::string_view provider, std::string_view event_id, const scope& owner);

}  // namespace idem::webhook
