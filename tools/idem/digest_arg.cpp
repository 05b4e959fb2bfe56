#include "digest_arg.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace idem::cli {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::vector<std::byte> parse_digest(std::string_view text) {
    if (text.size() == 16)
        throw std::invalid_argument(
            "idem: a 16-character key hash (the form logs print) is only the start of the record's digest and "
            "cannot find it; give the 64-character digest, the 32-character key_hash a SQL table shows, or the "
            "record's --namespace, scope flag (--global, --user, ...) and --key");
    if (text.size() != 64 && text.size() != 32)
        throw std::invalid_argument(
            fmt::format("idem: --key-hash must be the record's 64-character hex digest or the 32 characters of its SQL "
                        "key_hash, not {} characters",
                        text.size()));
    std::vector<std::byte> d(text.size() / 2);
    for (std::size_t i = 0; i < d.size(); ++i) {
        const int high = hex_value(text[2 * i]);
        const int low = hex_value(text[2 * i + 1]);
        if (high < 0 || low < 0) throw std::invalid_argument("idem: --key-hash must be hexadecimal (0-9, a-f)");
        d[i] = static_cast<std::byte>(high * 16 + low);
    }
    return d;
}

}  // namespace idem::cli
