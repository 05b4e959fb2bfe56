// idem/http/problem.hpp: the layer's errors, as application/problem+json
// (RFC 9457) with a stable code clients can branch on.
//
//   auto res = idem::http::problem(idem::http::codes::in_flight);
//   res.status;                  // 409
//   res.header("Cache-Control"); // "no-store"
#pragma once

#include <string_view>

#include "idem/export.hpp"
#include "idem/http/message.hpp"

namespace idem::http {

struct IDEM_API problem_code {
    int status;
    std::string_view code;  // e.g. "Idempotency.KeyReused"
    std::string_view title;
};

namespace codes {
inline constexpr problem_code key_missing{400, "Idempotency.KeyMissing", "This endpoint requires an Idempotency-Key"};
inline constexpr problem_code key_invalid{400, "Idempotency.KeyInvalid", "The Idempotency-Key header is invalid"};
inline constexpr problem_code scope_required{400, "Idempotency.ScopeRequired",
                                             "An idempotency key needs an identified caller"};
inline constexpr problem_code in_flight{409, "Idempotency.InFlight",
                                        "A request with this Idempotency-Key is still being processed"};
inline constexpr problem_code key_reused{422, "Idempotency.KeyReused",
                                         "This Idempotency-Key was used for a different request"};
// The request ran long ago: its response is no longer kept, but its key is
// remembered (profile_options::remember), so it does not run again (docs/http.md).
inline constexpr problem_code expired{410, "Idempotency.Expired",
                                      "This request was processed; its response is no longer kept"};
inline constexpr problem_code store_unavailable{503, "Idempotency.StoreUnavailable",
                                                "Idempotency records are unavailable; retry later"};
// The endpoint failed and its database transaction is known to have rolled back
// (idem::error::rolled_back()): nothing happened, and the key is free again.
inline constexpr problem_code rolled_back{503, "Idempotency.RolledBack",
                                          "The request failed and was rolled back; retry it with the same key"};
// The answer to COMMIT was lost: the request's writes and its record committed
// together or not at all, so a retry with the same key replays or runs.
inline constexpr problem_code in_doubt{503, "Idempotency.InDoubt",
                                       "The outcome of the request is unknown; retry it with the same key"};
// The database form cannot record a streamed response, or one above max_stored_body:
// the endpoint's writes were rolled back rather than committed without a record.
inline constexpr problem_code response_not_stored{500, "Idempotency.ResponseNotStored",
                                                  "The response could not be recorded; nothing was done"};
// The reconciliation route on a record store that cannot look a key up.
inline constexpr problem_code lookup_unsupported{501, "Idempotency.LookupUnsupported",
                                                 "This service's idempotency records cannot be looked up"};
// RFC 9110 section 5.5: a field value holding NUL is malformed (and C strings would cut it).
inline constexpr problem_code header_invalid{400, "Request.HeaderInvalid", "A header field value holds a NUL byte"};
// An exception escaped a handler; what it said is logged under the correlation id, never sent.
inline constexpr problem_code internal_error{500, "Server.InternalError", "The server failed to process the request"};
}  // namespace codes

// A problem+json response with Cache-Control: no-store.
[[nodiscard]] IDEM_API response problem(const problem_code& code);
// The same with "correlation_id" in the body and an X-Correlation-Id header.
[[nodiscard]] IDEM_API response problem(const problem_code& code, std::string_view correlation_id);

}  // namespace idem::http
