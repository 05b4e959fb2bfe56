// idem/http/client.hpp: call an idempotent API with cpp-httplib's client, retrying safely.
//
//   httplib::Client api("http://127.0.0.1:8080");
//   idem::http::outgoing_request transfer{.path = "/transfers", .body = R"({"from":"a","to":"b","amount":5})",
//                                         .headers = {{"Authorization", "Bearer c1"}}};
//   idem::http::call_result r = idem::http::send(api, transfer);  // one key for every attempt
//   if (r.status == idem::http::call_status::answered) use(r.answer->status, r.answer->body);
//
// Link idem_httplib (pkg-config idem-httplib).
#pragma once

#include "idem/export.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "idem/http/message.hpp"

namespace httplib {
class Client;
}  // namespace httplib

namespace idem::http {

// A fresh random key: an RFC 9562 UUIDv4 in lowercase canonical text.
[[nodiscard]] IDEM_API std::string new_key();

// One logical request. Every attempt sends exactly these bytes and this key.
struct outgoing_request {
    std::string method = "POST";
    std::string path = {};
    std::string body = {};
    std::string content_type = "application/json";
    std::vector<std::pair<std::string, std::string>> headers = {};  // e.g. Authorization
    // Random by default; keys::derive(...) for work named by business ids, so a
    // restarted caller sends the same key again.
    std::string key = new_key();
};

struct retry_policy {
    std::string header_name = "Idempotency-Key";
    int max_attempts = 10;
    std::chrono::milliseconds first_backoff{100};  // doubled per attempt, with jitter
    std::chrono::milliseconds max_backoff{5000};
    std::chrono::milliseconds max_retry_after{30000};  // a longer Retry-After is cut to this
    std::chrono::milliseconds budget{60000};           // no attempt starts later than this after the first
};

enum class call_status {
    answered,  // a final answer: 2xx, 3xx, a final 4xx (a business 409 and 422 KeyReused included), or a replay
    gave_up,   // attempts or budget used up; `answer` holds the last response, if any came
};

struct call_result {
    call_status status;
    std::optional<response> answer;  // the last response received
    std::string error;               // the last transport failure, when an attempt got no response
    int attempts;
    std::string key;  // the key every attempt carried
};

// Sends `request` until a final answer, every attempt with the same key and bytes.
// It sends again, after exponential backoff with jitter, or the server's
// Retry-After (seconds or HTTP-date, at most max_retry_after) when longer, on:
// - no response (refused, reset, timed out): the request may not have arrived,
//   and if it did, the key makes the next attempt a replay;
// - 408 Request Timeout: the server gave up reading the request;
// - 409 with problem code Idempotency.InFlight (an application/problem+json
//   body) or with Retry-After: the first attempt is still running, and its
//   answer comes as a replay once it ends;
// - 425 Too Early and 429 Too Many Requests: not now, later;
// - a 5xx without Idempotent-Replayed: true: the server failed this time (a 5xx
//   an idempotent server keeps at all, it keeps briefly).
// Everything else is the answer (call_status::answered) and is not sent again:
// 2xx and 3xx; a replay (Idempotent-Replayed: true), whatever its status, is the
// server's stored answer and would only come back; a 409 that is neither of the
// above is a business conflict (an account that exists), which the same request
// meets every time; every other 4xx (422 KeyReused included) says the request
// itself is wrong. An invalid key, or a header holding NUL, CR or LF, throws
// std::invalid_argument with nothing sent.
[[nodiscard]] IDEM_API call_result send(httplib::Client& client, const outgoing_request& request,
                                        const retry_policy& policy = {});

}  // namespace idem::http
