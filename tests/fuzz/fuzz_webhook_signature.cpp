// Any secret, body and X-Signature value: signature_matches never throws, and
// accepts exactly the hex HMAC-SHA256 of the body under the secret, in either case.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_input.hpp"
#include "idem/webhook.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data, size));
    const auto secret = idem::fuzz::part(parts, 0), body = idem::fuzz::part(parts, 1),
               signature = idem::fuzz::part(parts, 2);
    const std::string expected = idem::webhook::hmac_sha256_hex(secret, body);
    std::string lowered(signature);
    for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (idem::webhook::signature_matches(secret, body, signature) != (lowered == expected))
        throw std::logic_error("signature_matches disagrees with the HMAC");
    std::string upper = expected;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!idem::webhook::signature_matches(secret, body, expected) ||
        !idem::webhook::signature_matches(secret, body, upper))
        throw std::logic_error("the true signature was refused");
    return 0;
}
