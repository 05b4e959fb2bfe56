// idem/webhook.hpp: provider webhooks verified, deduplicated by event id and
// answered the way providers expect, in one call.
//
//   idem::webhook::receiver stripe{exec, {.provider = "stripe",
//       .scheme = idem::webhook::timestamped_signature{},       // Stripe-Signature: t=...,v1=...
//       .secrets = {current_secret, previous_secret},
//       .identify = idem::webhook::id_from_json("id", idem::scope::custom("account", "acct_1"))}};
//   auto a = stripe.handle(runner, {.body = req.body, .headers = headers},
//       [&](idem::unit_of_work& tx, const idem::webhook::event& e) { return apply(tx, e.body); });
//   res.status = a.status;  // 2xx: done for good; 5xx: the provider redelivers
//
// Signatures, handler results and answers: docs/webhooks.md.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "idem/clock.hpp"
#include "idem/database.hpp"
#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/record_key.hpp"
#include "idem/result_codec.hpp"

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

// One request as received: the exact body bytes and the header fields.
struct delivery {
    std::string_view body = {};
    std::vector<std::pair<std::string_view, std::string_view>> headers = {};

    // The first value of a header, matched case-insensitively; empty when absent.
    [[nodiscard]] std::string_view header(std::string_view name) const noexcept;
};

// Stripe's scheme: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]`, each
// v1 the HMAC-SHA256 of "<t>.<body>"; other elements (v0) are ignored. A timestamp
// further than `tolerance` from now is refused, so a captured delivery cannot be
// replayed later (and a replay within the window is a duplicate event).
struct timestamped_signature {
    std::string header = "Stripe-Signature";
    std::string version = "v1";
    std::chrono::seconds tolerance = std::chrono::minutes(5);
};

// GitHub's scheme: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the body.
struct body_signature {
    std::string header = "X-Hub-Signature-256";
    std::string prefix = "sha256=";
};

using signature_scheme = std::variant<timestamped_signature, body_signature>;

// The header value a sender writes under the timestamped scheme, signed at `at`:
// "t=<unix seconds>,v1=<hex>", with one v1 per secret (a sender rotating its secret
// signs with both, and receivers with either verify). std::invalid_argument when no
// secret is given or one is empty.
[[nodiscard]] IDEM_API std::string sign_timestamped(std::span<const std::string> secrets, std::string_view body,
                                                    time_point at, std::string_view version = "v1");

enum class verification {
    valid,
    missing,            // no signature header
    malformed,          // the header does not have the scheme's shape
    mismatch,           // no signature matches the body under any secret
    outside_tolerance,  // timestamped: signed too long ago (or too far ahead)
};

[[nodiscard]] IDEM_API std::string_view to_string(verification v) noexcept;

// Checks `d` against every secret (rotation: the new one and the old one until
// the provider stops using it); each comparison takes constant time.
[[nodiscard]] IDEM_API verification verify(const signature_scheme& scheme, std::span<const std::string> secrets,
                                           const delivery& d, time_point now);

// Who an event belongs to and its id, read from a verified delivery.
struct event_identity {
    std::string id;
    idem::scope owner;
};
using identify_event = std::function<std::optional<event_identity>(const delivery&)>;

// The id is the top-level string field `field` of the JSON body (Stripe: "id").
[[nodiscard]] IDEM_API identify_event id_from_json(std::string field, idem::scope owner);
// The id is a header's value (GitHub: "X-GitHub-Delivery").
[[nodiscard]] IDEM_API identify_event id_from_header(std::string header, idem::scope owner);

// What a handler is given: the event's id and the verified body.
struct event {
    std::string_view id;
    std::string_view body;
};

// What the handler made of an event.
class IDEM_API handler_result {
public:
    enum class kind { applied, permanent_failure, transient_failure };

    // Done: stored, answered 200; redeliveries replay it.
    [[nodiscard]] static handler_result applied(std::string detail = {}) { return {kind::applied, std::move(detail)}; }
    // Can never be applied (a malformed payload, an amount past a limit): stored and
    // answered 200, so the provider stops redelivering; redeliveries replay the failure.
    [[nodiscard]] static handler_result permanent_failure(std::string reason) {
        return {kind::permanent_failure, std::move(reason)};
    }
    // May apply later: a dependency is down, or the event arrived before what it
    // refers to (an account not opened yet: events arrive out of order). Answered
    // 503 with Retry-After, the key released and, in a unit of work, every write
    // rolled back, so the provider's redelivery runs it again.
    [[nodiscard]] static handler_result transient_failure(std::string reason) {
        return {kind::transient_failure, std::move(reason)};
    }

    [[nodiscard]] kind outcome() const noexcept { return kind_; }
    [[nodiscard]] const std::string& detail() const noexcept { return detail_; }
    [[nodiscard]] bool operator==(const handler_result&) const = default;

private:
    handler_result(kind k, std::string detail) : kind_(k), detail_(std::move(detail)) {}
    kind kind_;
    std::string detail_;
};

// How a delivery was answered.
enum class verdict {
    applied,            // 200: the handler applied the event now
    duplicate,          // 200: the event was handled before; its outcome is replayed
    permanent_failure,  // 200: the handler can never apply it; stored, so redeliveries stop
    transient_failure,  // 503: the key was released; the provider's redelivery runs it again
    in_flight,          // 409: another delivery of the event is being handled; the provider retries
    unauthenticated,    // 401: the signature did not verify; nothing was claimed
    unidentified,       // 400: a verified delivery without an event id; nothing was claimed
};

[[nodiscard]] IDEM_API std::string_view to_string(verdict v) noexcept;

struct answer {
    int status;
    idem::webhook::verdict verdict;
    std::string body;  // application/json: {"event": ..., "result": ..., "detail": ...}; never a secret
    // What the handler said, for applied, duplicate and the failures.
    std::optional<handler_result> result = {};
    // Seconds for a Retry-After header: set on 503 and 409, which the provider redelivers.
    int retry_after = 0;

    // Whether the provider will deliver again (any answer but 2xx).
    [[nodiscard]] bool redelivery_expected() const noexcept { return status < 200 || status > 299; }
};

// Fields have default initializers so designated initializers stay warning-free.
struct receiver_options {
    std::string provider = {};              // the namespace "webhook:{provider}"
    signature_scheme scheme = {};           // how the provider signs
    std::vector<std::string> secrets = {};  // any one verifies: rotate by adding, then removing
    identify_event identify = {};           // the event id and its owner
    execution_options execution = {};       // profile, mode, retention (the provider's redelivery window)
    std::shared_ptr<const idem::clock> time = idem::clock::system();  // for the tolerance window
};

namespace detail {
// Stores a handler_result; classifies a transient failure as release.
class IDEM_API handler_result_codec final : public result_codec<handler_result> {
public:
    [[nodiscard]] std::string serialize(const handler_result& r) const override;
    [[nodiscard]] handler_result deserialize(std::string_view payload) const override;
    [[nodiscard]] classification classify(const handler_result& r) const override;
};
}  // namespace detail

class IDEM_API receiver {
public:
    // options_error naming every problem: the provider empty (or no namespace), no
    // secret (or an empty one), identify missing, the clock null, a timestamped
    // scheme's tolerance not positive.
    receiver(executor& exec, receiver_options options);

    // Lease mode: handler(const event&) -> handler_result, its effects outside a database
    // transaction. An exception from the handler propagates (the server answers 500)
    // and the key stays in flight until its lease ends: the outcome is unknown.
    template <class Handler>
    [[nodiscard]] answer handle(const delivery& d, Handler&& handler) {
        auto admitted = admit(d);
        if (auto* refused = std::get_if<answer>(&admitted)) return std::move(*refused);
        const auto& [key, id] = std::get<accepted>(admitted);
        const event e{id, d.body};
        return respond(id, exec_.execute(
                               key, fingerprint, call_options(), [&] { return handler(e); }, codec_));
    }

    // In a unit of work of `db`: handler(unit_of_work&, const event&) -> handler_result.
    // The record commits with the handler's writes; a transient failure rolls both
    // back (answered 503) and an exception does too (it propagates), so the key is
    // free for the redelivery. A concurrent redelivery waits for the first and is
    // answered as a duplicate. `db`'s executor decides (mode, profile, telemetry).
    template <class Handler>
    [[nodiscard]] answer handle(database& db, const delivery& d, Handler&& handler) {
        auto admitted = admit(d);
        if (auto* refused = std::get_if<answer>(&admitted)) return std::move(*refused);
        const auto& [key, id] = std::get<accepted>(admitted);
        const event e{id, d.body};
        return respond(
            id, db.once(
                    key, fingerprint, [&](unit_of_work& uow) { return handler(uow, e); }, codec_, call_options()));
    }

    [[nodiscard]] const receiver_options& options() const noexcept { return options_; }

private:
    struct accepted {
        record_key key;
        std::string id;
    };

    // The key and id of a verified, identified delivery, or the answer refusing it.
    [[nodiscard]] std::variant<accepted, answer> admit(const delivery& d) const;
    [[nodiscard]] answer respond(std::string_view id, const execution<handler_result>& e) const;
    // The receiver's execution options, counted under entry_point::webhook.
    [[nodiscard]] execution_options call_options() const;

    executor& exec_;
    receiver_options options_;
    detail::handler_result_codec codec_;
};

}  // namespace idem::webhook
