// Any method, target and body: the fingerprint is 64 lowercase hex characters,
// the same every time, and moving one byte across a field boundary changes it
// (the fields are length-prefixed, so "POST" "/a" never equals "POST/" "a").
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_input.hpp"
#include "idem/http/fingerprint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data, size));
    const auto method = idem::fuzz::part(parts, 0), target = idem::fuzz::part(parts, 1),
               body = idem::fuzz::part(parts, 2);
    const std::string fingerprint = idem::http::request_fingerprint(method, target, body);
    if (fingerprint.size() != 64 || fingerprint.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw std::logic_error("not 64 lowercase hex characters");
    if (fingerprint != idem::http::request_fingerprint(method, target, body)) throw std::logic_error("unstable");
    if (!target.empty()) {
        const std::string longer_method = std::string(method) + target.front();
        if (idem::http::request_fingerprint(longer_method, target.substr(1), body) == fingerprint)
            throw std::logic_error("a byte moved from the target to the method kept the fingerprint");
    }
    if (!body.empty()) {
        const std::string longer_target = std::string(target) + body.front();
        if (idem::http::request_fingerprint(method, longer_target, body.substr(1)) == fingerprint)
            throw std::logic_error("a byte moved from the body to the target kept the fingerprint");
    }
    return 0;
}
