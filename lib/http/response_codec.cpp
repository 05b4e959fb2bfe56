#include "idem/http/response_codec.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace idem::http {
namespace {

// Stored form: "IDR1", status (u16), header count (u16), each header as
// u32-length-prefixed name and value, then the body bytes to the end.
constexpr std::string_view magic = "IDR1";

void put_u16(std::string& out, std::uint32_t v) {
    out += static_cast<char>((v >> 8) & 0xFF);
    out += static_cast<char>(v & 0xFF);
}

void put_u32(std::string& out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xFF);
}

class reader {
public:
    explicit reader(std::string_view bytes) : rest_(bytes) {}

    std::uint32_t number(int width) {
        need(static_cast<std::size_t>(width));
        std::uint32_t v = 0;
        for (int i = 0; i < width; ++i) v = (v << 8) | static_cast<unsigned char>(rest_[static_cast<std::size_t>(i)]);
        rest_.remove_prefix(static_cast<std::size_t>(width));
        return v;
    }
    std::string_view bytes(std::size_t n) {
        need(n);
        auto out = rest_.substr(0, n);
        rest_.remove_prefix(n);
        return out;
    }
    std::string_view rest() const { return rest_; }

private:
    void need(std::size_t n) const {
        if (rest_.size() < n) throw std::runtime_error("idem: a stored response is truncated");
    }
    std::string_view rest_;
};

using header = std::pair<std::string, std::string>;

bool is_replayed(const std::vector<std::string>& allowed_headers, std::string_view name) {
    if (header_name_equals(name, "Set-Cookie")) return false;
    return std::any_of(allowed_headers.begin(), allowed_headers.end(),
                       [&](const std::string& allowed) { return header_name_equals(allowed, name); });
}

std::vector<const header*> replayed_headers(const std::vector<std::string>& allowed_headers, const response& r) {
    std::vector<const header*> kept;
    for (const auto& h : r.headers)
        if (is_replayed(allowed_headers, h.first)) kept.push_back(&h);
    return kept;
}

// What the stored form cannot hold, or nothing: a status deserialize refuses,
// more headers than the u16 count, a name or value longer than its u32 length.
const char* unstorable(const response& r, const std::vector<const header*>& kept) {
    if (r.status < 100 || r.status > 999) return "its status is not between 100 and 999";
    if (kept.size() > 0xFFFF) return "it has more than 65535 replayed headers";
    for (const auto* h : kept)
        if (h->first.size() > 0xFFFFFFFF || h->second.size() > 0xFFFFFFFF)
            return "a replayed header's name or value is 4 GiB or longer";
    return nullptr;
}

}  // namespace

std::string response_codec::serialize(const response& sent) const {
    std::optional<response> redacted;
    if (redact_) redact_(redacted.emplace(sent));
    const response& r = redacted ? *redacted : sent;
    const auto kept = replayed_headers(replayed_headers_, r);
    if (const char* why = unstorable(r, kept))
        throw std::invalid_argument(std::string("idem: the response cannot be stored: ") + why);
    std::string out(magic);
    put_u16(out, static_cast<std::uint32_t>(r.status));
    put_u16(out, static_cast<std::uint32_t>(kept.size()));
    for (const auto* h : kept) {
        put_u32(out, static_cast<std::uint32_t>(h->first.size()));
        out += h->first;
        put_u32(out, static_cast<std::uint32_t>(h->second.size()));
        out += h->second;
    }
    out += r.body;
    return out;
}

response response_codec::deserialize(std::string_view payload) const {
    reader in(payload);
    if (in.bytes(magic.size()) != magic) throw std::runtime_error("idem: not a stored response");
    response r;
    r.status = static_cast<int>(in.number(2));
    if (r.status < 100 || r.status > 999) throw std::runtime_error("idem: a stored response has no valid status");
    const std::uint32_t count = in.number(2);
    for (std::uint32_t i = 0; i < count; ++i) {
        std::string name(in.bytes(in.number(4)));
        std::string value(in.bytes(in.number(4)));
        r.headers.emplace_back(std::move(name), std::move(value));
    }
    r.body = in.rest();
    return r;
}

bool response_codec::storable(const response& r) const {
    return !r.streamed && r.body.size() <= max_stored_body_ &&
           unstorable(r, replayed_headers(replayed_headers_, r)) == nullptr;
}

classification response_codec::classify(const response& r) const {
    if (!storable(r)) return classification::release;
    if (r.status == 503 || r.status == 504) return classification::keep_in_flight;
    if (r.status >= 500) return release_server_errors_ ? classification::release : classification::store_as_failure;
    if (r.status == 408 || r.status == 409 || r.status == 425 || r.status == 429) return classification::release;
    return classification::store;
}

}  // namespace idem::http
