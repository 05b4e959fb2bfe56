// Any bytes as a stored response: decoding either fails with std::runtime_error
// or yields a response that re-encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "idem/http/response_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const idem::http::layer_options everything = [] {
        idem::http::layer_options o;
        o.replayed_headers.clear();
        return o;
    }();
    static const idem::http::response_codec codec(everything);
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    idem::http::response decoded;
    try {
        decoded = codec.deserialize(input);
    } catch (const std::runtime_error&) {
        return 0;
    }
    // Headers are dropped on re-encoding (none are allow-listed here): decode again and compare.
    const auto again = codec.deserialize(codec.serialize(decoded));
    if (again.status != decoded.status || again.body != decoded.body || !again.headers.empty())
        throw std::logic_error("re-encoding changed the response");
    return 0;
}
