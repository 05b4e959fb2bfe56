#include "idem/http/problem.hpp"

#include <fmt/format.h>

namespace idem::http {

response problem(const problem_code& code) {
    response r;
    r.status = code.status;
    // Codes and titles are constants without characters that need JSON escaping.
    r.body = fmt::format(R"({{"type":"urn:idem:{}","title":"{}","status":{},"code":"{}"}})", code.code,
                         code.title, code.status, code.code);
    r.set_header("Content-Type", "application/problem+json");
    r.set_header("Cache-Control", "no-store");
    return r;
}

}  // namespace idem::http
