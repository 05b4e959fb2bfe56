#include "idem/http/problem.hpp"

#include <fmt/format.h>

namespace idem::http {
namespace {

// Codes and titles are constants that need no escaping; a correlation id may come from elsewhere.
std::string json_escaped(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            out += fmt::format("\\u{:04x}", static_cast<int>(c));
            continue;
        }
        out += c;
    }
    return out;
}

response problem_with(const problem_code& code, std::string_view extra_members) {
    response r;
    r.status = code.status;
    r.body = fmt::format(R"({{"type":"urn:idem:{}","title":"{}","status":{},"code":"{}"{}}})", code.code, code.title,
                         code.status, code.code, extra_members);
    r.set_header("Content-Type", "application/problem+json");
    r.set_header("Cache-Control", "no-store");
    return r;
}

}  // namespace

response problem(const problem_code& code) {
    return problem_with(code, "");
}

response problem(const problem_code& code, std::string_view correlation_id) {
    response r = problem_with(code, fmt::format(R"(,"correlation_id":"{}")", json_escaped(correlation_id)));
    r.set_header("X-Correlation-Id", correlation_id);
    return r;
}

}  // namespace idem::http
