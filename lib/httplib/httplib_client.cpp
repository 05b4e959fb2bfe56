#include "idem/http/client.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <ctime>
#include <stdexcept>
#include <string_view>

#include "idem/http/key_header.hpp"
#include "idem/keys.hpp"
#include "internal/crypto.hpp"
#include "internal/retry_schedule.hpp"

namespace idem::http {
namespace {

using std::chrono::milliseconds;

// The media type of a Content-Type value, without parameters, in lower case.
std::string media_type(std::string_view content_type) {
    std::string type(content_type.substr(0, content_type.find(';')));
    while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
    for (char& c : type)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return type;
}

// The stable code of an application/problem+json body (RFC 9457; idem's layer
// and the payments service name it "code"); empty for any other body.
std::string problem_code(const response& r) {
    if (media_type(r.header("Content-Type")) != "application/problem+json") return {};
    const auto body = nlohmann::json::parse(r.body, nullptr, false);
    if (!body.is_object()) return {};
    const auto code = body.find("code");
    return code != body.end() && code->is_string() ? code->get<std::string>() : std::string();
}

// The rules, with their reasons, are in the header (send).
bool worth_retrying(const response& r) {
    if (r.header("Idempotent-Replayed") == "true") return false;  // the server's one true answer
    if (r.status == 409) return !r.header("Retry-After").empty() || problem_code(r) == "Idempotency.InFlight";
    return r.status == 408 || r.status == 425 || r.status == 429 || r.status >= 500;
}

// Retry-After (RFC 9110 section 10.2.3): delay-seconds or an IMF-fixdate.
std::optional<milliseconds> retry_after(const response& r) {
    const std::string_view value = r.header("Retry-After");
    if (value.empty()) return std::nullopt;
    long long seconds = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec == std::errc() && end == value.data() + value.size() && seconds >= 0) return milliseconds(seconds * 1000);
    std::tm when{};
    const std::string text(value);
    if (strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &when) == nullptr) return std::nullopt;
    const auto at = std::chrono::system_clock::from_time_t(timegm(&when));
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(at - std::chrono::system_clock::now()));
}

response received(const httplib::Response& res) {
    response r;
    r.status = res.status;
    r.headers.assign(res.headers.begin(), res.headers.end());
    r.body = res.body;
    return r;
}

}  // namespace

std::string new_key() {
    return detail::random_uuid();
}

call_result send(httplib::Client& client, const outgoing_request& request, const retry_policy& policy) {
    if (!keys::is_valid(request.key)) throw std::invalid_argument("idem: the request's key is not a valid key");
    if (policy.max_attempts < 1) throw std::invalid_argument("idem: max_attempts must be at least 1");
    // cpp-httplib writes header fields as C strings: a NUL would cut the value, CR or LF split it.
    const auto unsafe = [](std::string_view text) {
        return text.find_first_of(std::string_view("\0\r\n", 3)) != text.npos;
    };
    for (const auto& [name, value] : request.headers)
        if (unsafe(name) || unsafe(value)) throw std::invalid_argument("idem: header " + name + " holds NUL, CR or LF");
    if (unsafe(request.content_type)) throw std::invalid_argument("idem: the content type holds NUL, CR or LF");
    httplib::Request wire;
    wire.method = request.method;
    wire.path = request.path;
    wire.body = request.body;
    for (const auto& [name, value] : request.headers) wire.headers.emplace(name, value);
    wire.set_header(policy.header_name, key_header_value(request.key));  // bare, or quoted where it must be
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" || request.method == "PATCH")
        wire.set_header("Content-Type", request.content_type);

    detail::retrying retry({.attempts = policy.max_attempts,
                            .first = policy.first_backoff,
                            .ceiling = policy.max_backoff,
                            .budget = policy.budget});
    call_result result{call_status::gave_up, std::nullopt, {}, 0, request.key};
    while (true) {
        result.attempts = retry.attempt();
        milliseconds asked{0};
        if (httplib::Result res = client.send(wire)) {
            result.answer = received(*res);
            result.error.clear();
            if (!worth_retrying(*result.answer)) {
                result.status = call_status::answered;
                return result;
            }
            if (const auto after = retry_after(*result.answer)) asked = std::min(*after, policy.max_retry_after);
        } else {
            result.error = httplib::to_string(res.error());
        }
        if (!retry.wait(asked)) return result;
    }
}

}  // namespace idem::http
