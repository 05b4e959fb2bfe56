#include "idem/webhook.hpp"

#include <array>
#include <charconv>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "idem/http/message.hpp"
#include "idem/keys.hpp"
#include "internal/crypto.hpp"

namespace idem::webhook {
namespace {

using json = nlohmann::json;

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Whether any signature is the HMAC of `signed_text` under any secret. Every
// comparison runs; each takes time that depends only on the lengths.
bool any_matches(std::span<const std::string> secrets, std::string_view signed_text,
                 std::span<const std::string_view> signatures) noexcept {
    bool matched = false;
    for (const auto& secret : secrets)
        for (const auto signature : signatures) matched |= signature_matches(secret, signed_text, signature);
    return matched;
}

verification verify_body(const body_signature& scheme, std::span<const std::string> secrets, const delivery& d) {
    const std::string_view value = trim(d.header(scheme.header));
    if (value.empty()) return verification::missing;
    if (!value.starts_with(scheme.prefix)) return verification::malformed;
    const std::string_view signature = value.substr(scheme.prefix.size());
    if (signature.size() != 64) return verification::malformed;
    return any_matches(secrets, d.body, {&signature, 1}) ? verification::valid : verification::mismatch;
}

verification verify_timestamped(const timestamped_signature& scheme, std::span<const std::string> secrets,
                                const delivery& d, time_point now) {
    std::string_view value = trim(d.header(scheme.header));
    if (value.empty()) return verification::missing;
    std::optional<std::string_view> timestamp;
    std::vector<std::string_view> signatures;
    while (!value.empty()) {
        const auto comma = value.find(',');
        const std::string_view element = trim(value.substr(0, comma));
        value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
        const auto equals = element.find('=');
        if (equals == std::string_view::npos) return verification::malformed;
        const std::string_view name = element.substr(0, equals), content = element.substr(equals + 1);
        if (name == "t") {
            if (timestamp) return verification::malformed;
            timestamp = content;
        } else if (name == scheme.version) {
            signatures.push_back(content);
        }
    }
    long long seconds = 0;
    if (!timestamp || timestamp->empty() || signatures.empty()) return verification::malformed;
    const auto [end, error] = std::from_chars(timestamp->data(), timestamp->data() + timestamp->size(), seconds);
    if (error != std::errc{} || end != timestamp->data() + timestamp->size() || seconds < 0)
        return verification::malformed;
    // The signature first: an old timestamp is only worth reporting when it is authentic.
    std::string signed_text;
    signed_text.reserve(timestamp->size() + 1 + d.body.size());
    signed_text.append(*timestamp).append(".").append(d.body);
    if (!any_matches(secrets, signed_text, signatures)) return verification::mismatch;
    const auto age =
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()) - std::chrono::seconds(seconds);
    return age > scheme.tolerance || age < -scheme.tolerance ? verification::outside_tolerance : verification::valid;
}

json answer_json(std::string_view id, verdict v, std::string_view detail) {
    json body{{"result", to_string(v)}};
    if (!id.empty()) body["event"] = std::string(id);
    if (!detail.empty()) body["detail"] = std::string(detail);
    return body;
}

// Invalid UTF-8 from a handler's detail is replaced, never sent raw.
std::string text_of(const json& body) {
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

answer refusal(int status, verdict v, std::string_view detail) {
    return {status, v, text_of(answer_json({}, v, detail))};
}

}  // namespace

std::string hmac_sha256_hex(std::string_view secret, std::string_view body) {
    return idem::detail::hex(idem::detail::hmac_sha256(secret, body));
}

std::string sign_timestamped(std::span<const std::string> secrets, std::string_view body, time_point at,
                             std::string_view version) {
    if (secrets.empty()) throw std::invalid_argument("idem: signing needs at least one secret");
    const std::string t =
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count());
    std::string signed_text;
    signed_text.reserve(t.size() + 1 + body.size());
    signed_text.append(t).append(".").append(body);
    std::string value = "t=" + t;
    for (const auto& secret : secrets) {
        if (secret.empty()) throw std::invalid_argument("idem: a webhook secret is empty");
        value.append(",").append(version).append("=").append(hmac_sha256_hex(secret, signed_text));
    }
    return value;
}

bool signature_matches(std::string_view secret, std::string_view body, std::string_view signature_hex) noexcept {
    std::array<std::byte, 32> given{};
    if (signature_hex.size() != given.size() * 2) return false;
    for (std::size_t i = 0; i < given.size(); ++i) {
        const int high = hex_value(signature_hex[2 * i]), low = hex_value(signature_hex[2 * i + 1]);
        if (high < 0 || low < 0) return false;
        given[i] = std::byte(static_cast<unsigned char>(high * 16 + low));
    }
    try {
        return idem::detail::constant_time_equal(idem::detail::hmac_sha256(secret, body), given);
    } catch (...) {
        return false;  // the HMAC itself failed: nothing verified
    }
}

record_key event_key(std::string_view provider, std::string_view event_id, const scope& owner) {
    return record_key("webhook:" + std::string(provider), owner, keys::from_message(event_id, provider));
}

std::string_view delivery::header(std::string_view name) const noexcept {
    for (const auto& [n, v] : headers)
        if (http::header_name_equals(n, name)) return v;
    return {};
}

std::string_view to_string(verification v) noexcept {
    switch (v) {
        case verification::valid: return "valid";
        case verification::missing: return "missing";
        case verification::malformed: return "malformed";
        case verification::mismatch: return "mismatch";
        case verification::outside_tolerance: return "outside_tolerance";
    }
    return "unknown";
}

std::string_view to_string(verdict v) noexcept {
    switch (v) {
        case verdict::applied: return "applied";
        case verdict::duplicate: return "duplicate";
        case verdict::permanent_failure: return "permanent_failure";
        case verdict::transient_failure: return "transient_failure";
        case verdict::in_flight: return "in_flight";
        case verdict::unauthenticated: return "unauthenticated";
        case verdict::unidentified: return "unidentified";
    }
    return "unknown";
}

verification verify(const signature_scheme& scheme, std::span<const std::string> secrets, const delivery& d,
                    time_point now) {
    if (const auto* timestamped = std::get_if<timestamped_signature>(&scheme))
        return verify_timestamped(*timestamped, secrets, d, now);
    return verify_body(std::get<body_signature>(scheme), secrets, d);
}

identify_event id_from_json(std::string field, idem::scope owner) {
    return [field = std::move(field), owner = std::move(owner)](const delivery& d) -> std::optional<event_identity> {
        const json body = json::parse(d.body, nullptr, false);
        if (!body.is_object()) return std::nullopt;
        const auto it = body.find(field);
        if (it == body.end() || !it->is_string()) return std::nullopt;
        return event_identity{it->get<std::string>(), owner};
    };
}

identify_event id_from_header(std::string header, idem::scope owner) {
    return [header = std::move(header), owner = std::move(owner)](const delivery& d) -> std::optional<event_identity> {
        const std::string_view value = trim(d.header(header));
        if (value.empty()) return std::nullopt;
        return event_identity{std::string(value), owner};
    };
}

namespace detail {

// One letter for the kind, then the detail as it is.
std::string handler_result_codec::serialize(const handler_result& r) const {
    const char kind = r.outcome() == handler_result::kind::applied ? 'A' : 'P';
    return kind + r.detail();
}

handler_result handler_result_codec::deserialize(std::string_view payload) const {
    if (payload.empty()) throw std::invalid_argument("idem: an empty webhook result");
    const std::string detail(payload.substr(1));
    if (payload.front() == 'A') return handler_result::applied(detail);
    if (payload.front() == 'P') return handler_result::permanent_failure(detail);
    throw std::invalid_argument("idem: a webhook result of unknown kind");
}

classification handler_result_codec::classify(const handler_result& r) const {
    // A permanent failure is as final as a success: kept as long, so redeliveries stop.
    return r.outcome() == handler_result::kind::transient_failure ? classification::release : classification::store;
}

}  // namespace detail

receiver::receiver(executor& exec, receiver_options options) : exec_(exec), options_(std::move(options)) {
    std::vector<std::string> problems;
    if (options_.provider.empty()) problems.emplace_back("provider is empty");
    try {
        if (!options_.provider.empty()) (void)event_key(options_.provider, "probe", scope::global());
    } catch (const std::invalid_argument&) {
        problems.emplace_back("provider must be UTF-8, short enough for a namespace");
    }
    if (options_.secrets.empty()) problems.emplace_back("secrets is empty: at least one is needed");
    for (const auto& secret : options_.secrets)
        if (secret.empty()) problems.emplace_back("secrets holds an empty secret");
    if (!options_.identify) problems.emplace_back("identify is missing");
    if (!options_.time) problems.emplace_back("time (the clock) is null");
    if (const auto* t = std::get_if<timestamped_signature>(&options_.scheme); t != nullptr && t->tolerance.count() <= 0)
        problems.emplace_back("scheme's tolerance must be positive");
    if (!problems.empty()) throw options_error(std::move(problems));
}

std::variant<receiver::accepted, answer> receiver::admit(const delivery& d) const {
    const verification v = verify(options_.scheme, options_.secrets, d, options_.time->now());
    if (v != verification::valid) return refusal(401, verdict::unauthenticated, to_string(v));
    auto identity = options_.identify(d);
    if (!identity || identity->id.empty()) return refusal(400, verdict::unidentified, "no event id");
    try {
        return accepted{event_key(options_.provider, identity->id, identity->owner), std::move(identity->id)};
    } catch (const std::invalid_argument&) {
        return refusal(400, verdict::unidentified, "the event id is not UTF-8");
    }
}

answer receiver::respond(std::string_view id, const execution<handler_result>& e) const {
    if (e.status() == execution_status::in_flight)
        return {409, verdict::in_flight,
                text_of(answer_json(id, verdict::in_flight, "another delivery is being handled")), std::nullopt, 1};
    if (e.status() == execution_status::expired)  // handled long ago; its result is no longer kept
        return {200, verdict::duplicate,
                text_of(answer_json(id, verdict::duplicate, "handled before; its result is no longer kept")),
                std::nullopt, 0};
    if (!e.has_value())  // key_reused cannot happen: the fingerprint is constant
        throw std::logic_error("idem: a webhook event key was reused");
    const handler_result& r = e.value();
    verdict v = verdict::applied;
    int status = 200;
    if (r.outcome() == handler_result::kind::transient_failure) {
        v = verdict::transient_failure;
        status = 503;
    } else if (e.status() == execution_status::replayed) {
        v = verdict::duplicate;
    } else if (r.outcome() == handler_result::kind::permanent_failure) {
        v = verdict::permanent_failure;
    }
    json body = answer_json(id, v, r.detail());
    if (v == verdict::duplicate)
        body["first"] = r.outcome() == handler_result::kind::applied ? "applied" : "permanent_failure";
    return {status, v, text_of(body), r, status == 503 ? 1 : 0};
}

execution_options receiver::call_options() const {
    execution_options o = options_.execution;
    o.entry = entry_point::webhook;
    return o;
}

}  // namespace idem::webhook
