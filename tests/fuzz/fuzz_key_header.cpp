// Any bytes as Idempotency-Key field lines: parsing never crashes, and a key it
// accepts is always a valid key.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "idem/http/key_header.hpp"
#include "idem/keys.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    std::vector<std::string_view> lines;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= input.size(); ++i) {
        if (i == input.size() || input[i] == '\n') {
            lines.push_back(input.substr(start, i - start));
            start = i + 1;
        }
    }
    const auto parsed = idem::http::parse_key_header(lines);
    if (parsed.state == idem::http::key_state::valid && !idem::keys::is_valid(parsed.key))
        throw std::logic_error("accepted an invalid key");
    if (parsed.state != idem::http::key_state::valid && !parsed.key.empty())
        throw std::logic_error("a rejected header left a key");
    return 0;
}
