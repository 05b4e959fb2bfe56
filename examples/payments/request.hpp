// What the payments service accepts from a client, checked before anything is
// stored: JSON objects, account and event ids of a safe alphabet, integer cents
// within bounds. A failure is a `rejected`, answered as problem+json.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace payments {

// Money is integer cents. Bounds keep every sum far from int64 overflow, and
// exact in any JSON client (below 2^53).
inline constexpr long long max_amount = 1'000'000'000'000;       // one transfer or deposit: 10^12 cents
inline constexpr long long max_balance = 1'000'000'000'000'000;  // one account: 10^15 cents

// A failure the client must fix, or a final business answer; stored and replayed.
struct rejected : std::runtime_error {
    rejected(int s, std::string c, const std::string& detail)
        : std::runtime_error(detail), status(s), code(std::move(c)) {}
    int status;
    std::string code;
};

// The body as a JSON object with exactly the `allowed` fields (400 otherwise).
nlohmann::json parse_object(const std::string& body, std::initializer_list<const char*> allowed);
// 1 to 64 characters of A-Z a-z 0-9 _ . - (so no NUL, no control or look-alike bytes).
std::string id_field(const nlohmann::json& j, const char* name);
// An integer number of cents in [minimum, maximum]; never a float, a string or out of int64.
long long cents_field(const nlohmann::json& j, const char* name, long long minimum, long long maximum);
// An id taken from a URL path, checked like id_field (404 when it cannot be one).
std::string path_id(const std::string& text, const char* what);
// Whether a Content-Type names JSON: application/json, in any case, with or
// without parameters ("application/json; charset=utf-8").
bool is_json_media_type(std::string_view content_type);
// A new id for every run of the work, never derived from the idempotency key:
// in Observe a retry runs the work again and must not collide with the first row.
std::string new_id(const char* prefix);

// The demo's authentication: the client named by an Authorization header
// "Bearer CLIENT", where CLIENT is an id as above; nothing for any other value.
std::optional<std::string> bearer_client(std::string_view authorization);

}  // namespace payments
