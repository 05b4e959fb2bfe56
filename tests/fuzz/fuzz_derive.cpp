// Any bytes as an operation and ids: derive either rejects them with
// std::invalid_argument or returns a valid key, the same one every time.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "idem/keys.hpp"
#include "idem/record_key.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= input.size(); ++i) {
        if (i == input.size() || input[i] == '\x1f') {
            parts.push_back(input.substr(start, i - start));
            start = i + 1;
        }
    }
    const std::string_view operation = parts.front();
    const std::vector<std::string_view> ids(parts.begin() + 1, parts.end());
    try {
        const std::string key = idem::keys::derive(operation, ids);
        if (!idem::keys::is_valid(key) || key != idem::keys::derive(operation, ids))
            throw std::logic_error("derive gave an invalid or unstable key");
        const idem::record_key record(std::string(operation) + ".ns", key);
        if (record.key_hash().size() != 16) throw std::logic_error("bad key hash");
    } catch (const std::invalid_argument&) {
        // invalid UTF-8, an empty operation or a too long namespace: rejected as it must be
    }
    return 0;
}
