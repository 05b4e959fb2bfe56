#include "request.hpp"

#include <algorithm>
#include <random>

namespace payments {
namespace {

bool is_id(std::string_view s) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == '-';
    });
}

}  // namespace

nlohmann::json parse_object(const std::string& body, std::initializer_list<const char*> allowed) {
    // A NUL anywhere: the JSON parser could stop at it and take a prefix for the body.
    if (body.find('\0') != std::string::npos)
        throw rejected(400, "Payments.MalformedBody", "the body holds a NUL byte");
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object()) throw rejected(400, "Payments.MalformedBody", "the body is not a JSON object");
    for (const auto& field : j.items())
        if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return field.key() == a; }))
            throw rejected(400, "Payments.MalformedBody", "unknown field " + nlohmann::json(field.key()).dump());
    return j;
}

std::string id_field(const nlohmann::json& j, const char* name) {
    if (!j.contains(name) || !j[name].is_string() || !is_id(j[name].get<std::string>()))
        throw rejected(400, "Payments.MalformedBody",
                       std::string(name) + " must be 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' or '-'");
    return j[name].get<std::string>();
}

long long cents_field(const nlohmann::json& j, const char* name, long long minimum, long long maximum) {
    const std::string rule = std::string(name) + " must be an integer number of cents from " + std::to_string(minimum) +
                             " to " + std::to_string(maximum);
    if (!j.contains(name)) throw rejected(400, "Payments.MalformedBody", rule);
    const auto& v = j[name];
    // nlohmann keeps integers beyond int64 as unsigned or float: both are refused here.
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<unsigned long long>() > 0x7fffffffffffffffULL))
        throw rejected(400, "Payments.MalformedBody", rule);
    const long long cents = v.get<long long>();
    if (cents < minimum || cents > maximum) throw rejected(422, "Payments.AmountOutOfRange", rule);
    return cents;
}

std::string path_id(const std::string& text, const char* what) {
    if (!is_id(text)) throw rejected(404, "Payments.Unknown", std::string("no such ") + what);
    return text;
}

bool is_json_media_type(std::string_view content_type) {
    const std::string_view type = content_type.substr(0, content_type.find(';'));
    std::size_t begin = 0, end = type.size();
    while (begin < end && (type[begin] == ' ' || type[begin] == '\t')) ++begin;
    while (end > begin && (type[end - 1] == ' ' || type[end - 1] == '\t')) --end;
    constexpr std::string_view json = "application/json";
    return end - begin == json.size() && std::equal(json.begin(), json.end(), type.begin() + begin, [](char a, char b) {
               return a == (b >= 'A' && b <= 'Z' ? static_cast<char>(b - 'A' + 'a') : b);
           });
}

std::string new_id(const char* prefix) {
    thread_local std::mt19937_64 random{std::random_device{}()};
    return prefix + std::to_string(random());
}

std::optional<std::string> bearer_client(std::string_view authorization) {
    constexpr std::string_view scheme = "Bearer ";
    if (!authorization.starts_with(scheme) || !is_id(authorization.substr(scheme.size()))) return std::nullopt;
    return std::string(authorization.substr(scheme.size()));
}

}  // namespace payments
