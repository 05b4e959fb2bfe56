// What a client sends the payments service (examples/payments/request.cpp):
// body, Authorization header and URL path id, cut by 0x1f. Each route's body
// checks either accept or throw `rejected` (400 or 422, answerable as
// problem+json); what they accept holds: only the route's fields, ids of the safe
// alphabet (so no NUL), cents within the route's bounds and equal to the body's
// number. A bearer client is accepted exactly when the header is "Bearer " and an id.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz_input.hpp"
#include "request.hpp"

namespace {

using payments::rejected;

void require(bool holds, const char* what) {
    if (!holds) throw std::logic_error(what);
}

bool safe_id(std::string_view s) {
    constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";
    return !s.empty() && s.size() <= 64 && s.find_first_not_of(alphabet) == std::string_view::npos;
}

// A refusal the service can answer: a client error, its problem+json serializable.
void answerable(const rejected& r, std::initializer_list<int> statuses) {
    require(std::find(statuses.begin(), statuses.end(), r.status) != statuses.end(), "a refusal with another status");
    require(r.code.starts_with("Payments."), "a refusal without a Payments code");
    (void)nlohmann::json{{"title", r.what()}, {"code", r.code}}.dump();  // throws on invalid UTF-8
}

template <class Check>
void accepted_or_rejected(Check&& check, std::initializer_list<int> statuses) {
    try {
        check();
    } catch (const rejected& r) {
        answerable(r, statuses);
    }
}

void check_id(const nlohmann::json& body, const char* name) {
    accepted_or_rejected(
        [&] {
            const std::string id = payments::id_field(body, name);
            require(safe_id(id), "an accepted id outside the alphabet");
            require(body[name] == id, "an accepted id other than the body's");
        },
        {400});
}

void check_cents(const nlohmann::json& body, const char* name, long long minimum, long long maximum) {
    try {
        const long long cents = payments::cents_field(body, name, minimum, maximum);
        require(cents >= minimum && cents <= maximum, "accepted cents out of bounds");
        require(body[name].is_number_integer() && body[name] == cents, "accepted cents other than the body's");
    } catch (const rejected& r) {
        answerable(r, {400, 422});
        // 422 names a well-formed amount out of range; anything else is malformed.
        if (r.status == 422) require(body[name].is_number_integer(), "a malformed amount answered 422");
    }
}

// One route: the body's fields, then each field as the route reads it.
void check_body(const std::string& text, std::initializer_list<const char*> fields, auto&& check_fields) {
    try {
        const nlohmann::json body = payments::parse_object(text, fields);
        require(text.find('\0') == std::string::npos, "a body with NUL accepted");
        require(body.is_object(), "an accepted body that is not an object");
        for (const auto& field : body.items())
            require(std::any_of(fields.begin(), fields.end(), [&](const char* f) { return field.key() == f; }),
                    "an accepted body with a field the route does not know");
        check_fields(body);
    } catch (const rejected& r) {
        answerable(r, {400});
    }
}

void check_bodies(const std::string& text) {
    check_body(text, {"id", "balance"}, [](const nlohmann::json& body) {
        check_id(body, "id");
        if (body.contains("balance")) check_cents(body, "balance", 0, payments::max_balance);
    });
    check_body(text, {"from", "to", "amount"}, [](const nlohmann::json& body) {
        check_id(body, "from");
        check_id(body, "to");
        check_cents(body, "amount", 1, payments::max_amount);
    });
    check_body(text, {"id", "account", "amount"}, [](const nlohmann::json& body) {
        check_id(body, "id");
        check_id(body, "account");
        check_cents(body, "amount", 1, payments::max_amount);
    });
}

void check_authorization(std::string_view header) {
    const auto client = payments::bearer_client(header);
    const bool bearer_id = header.starts_with("Bearer ") && safe_id(header.substr(7));
    require(client.has_value() == bearer_id, "a bearer client accepted or refused against the rule");
    if (client) require("Bearer " + *client == header, "a bearer client other than the header's");
}

void check_path(const std::string& text) {
    accepted_or_rejected(
        [&] {
            require(payments::path_id(text, "account") == text && safe_id(text),
                    "an accepted path id outside the alphabet");
        },
        {404});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data, size));
    check_bodies(std::string(idem::fuzz::part(parts, 0)));
    check_authorization(idem::fuzz::part(parts, 1));
    check_path(std::string(idem::fuzz::part(parts, 2)));
    return 0;
}
