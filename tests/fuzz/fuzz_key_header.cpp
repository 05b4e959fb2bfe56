// Any bytes as Idempotency-Key field lines: parsing never crashes; a key it
// accepts is always a valid key, read from one line that is the key itself (a
// bare key in none of the shapes RFC 8941 reads otherwise) or its sf-string
// followed by nothing but parameters; and the value a client sends for that key
// reads back as the same key.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "idem/http/key_header.hpp"
#include "idem/keys.hpp"

namespace {

std::string_view trimmed(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

void require(bool holds, const char* what) {
    if (!holds) throw std::logic_error(what);
}

}  // namespace

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
    if (parsed.state != idem::http::key_state::valid) {
        require(parsed.key.empty(), "a rejected header left a key");
        return 0;
    }
    require(idem::keys::is_valid(parsed.key), "accepted an invalid key");
    require(lines.size() == 1, "accepted several field lines");
    const std::string_view value = trimmed(lines.front());
    if (value.front() == '"') {
        // The key holds no DQUOTE or backslash, so its sf-string is DQUOTE key DQUOTE.
        const std::string quoted = '"' + parsed.key + '"';
        require(value.starts_with(quoted), "an sf-string read as another key");
        const std::string_view rest = value.substr(quoted.size());
        require(rest.empty() || rest.front() == ';', "accepted something after an sf-string but parameters");
    } else {
        require(value == parsed.key, "a bare key read as another key");
        require(value.front() != ':' && value.front() != '(' && value.front() != '?',
                "accepted a Byte Sequence, an Inner List or a Boolean as a bare key");
        require(value.find_first_of(",;") == std::string_view::npos, "accepted a List or parameters as a bare key");
    }
    const std::string sent = idem::http::key_header_value(parsed.key);
    const std::vector<std::string_view> again{sent};
    const auto reread = idem::http::parse_key_header(again);
    require(reread.state == idem::http::key_state::valid && reread.key == parsed.key,
            "the value sent for a key reads back as another");
    return 0;
}
