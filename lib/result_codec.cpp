#include "idem/result_codec.hpp"

#include <charconv>
#include <stdexcept>

namespace idem::detail {
namespace {

template <class I>
I parse(std::string_view payload) {
    I value = 0;
    const auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), value);
    if (ec != std::errc() || end != payload.data() + payload.size())
        throw std::invalid_argument("idem: the stored result is not an integer of this type");
    return value;
}

}  // namespace

long long parse_signed(std::string_view payload, long long min, long long max) {
    const long long value = parse<long long>(payload);
    if (value < min || value > max)
        throw std::invalid_argument("idem: the stored result is not an integer of this type");
    return value;
}

unsigned long long parse_unsigned(std::string_view payload, unsigned long long max) {
    const unsigned long long value = parse<unsigned long long>(payload);
    if (value > max) throw std::invalid_argument("idem: the stored result is not an integer of this type");
    return value;
}

}  // namespace idem::detail
