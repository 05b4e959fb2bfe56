#include "idem/http/fingerprint.hpp"

#include "internal/crypto.hpp"
#include "internal/text.hpp"

namespace idem::http {

std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body) {
    return request_fingerprint(method, target, body, {});
}

std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body,
                                std::span<const form_part> parts) {
    std::string framed;
    framed.reserve(method.size() + target.size() + body.size() + 32);
    detail::append_length_prefixed(framed, method);
    detail::append_length_prefixed(framed, target);
    detail::append_length_prefixed(framed, body);
    // After the body's own frame, so no body without parts can frame the same bytes.
    for (const form_part& part : parts) {
        for (std::string_view field : {part.name, part.filename, part.content_type, part.content})
            detail::append_length_prefixed(framed, field);
    }
    return detail::hex(detail::sha256(framed));
}

}  // namespace idem::http
