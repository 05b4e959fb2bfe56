#include "idem/http/fingerprint.hpp"

#include "internal/crypto.hpp"
#include "internal/text.hpp"

namespace idem::http {

std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body) {
    std::string framed;
    framed.reserve(method.size() + target.size() + body.size() + 32);
    detail::append_length_prefixed(framed, method);
    detail::append_length_prefixed(framed, target);
    detail::append_length_prefixed(framed, body);
    return detail::hex(detail::sha256(framed));
}

}  // namespace idem::http
