#include "record_report.hpp"

#include <ctime>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "digest_arg.hpp"
#include "duration_arg.hpp"
#include "internal/saturating_time.hpp"

namespace idem::cli {

void add_record_options(CLI::App& command, std::string& key_hash, record_key_flags& key) {
    command.add_option("--key-hash", key_hash,
                       "The record's digest: 64 hex characters (SHA-256 of its storage key), or the 32 of its "
                       "first 16 bytes, the key_hash a SQL table shows");
    key.add_to(command, false);
}

digest named_record(const std::string& key_hash, const record_key_flags& key) {
    const bool by_hash = !key_hash.empty();
    if (by_hash == key.given())
        throw std::invalid_argument(
            "idem: name the record either by --key-hash or by --namespace, one scope flag and --key");
    if (by_hash) return parse_digest(key_hash);
    if (key.name_space.empty() || key.key.empty())
        throw std::invalid_argument("idem: a record is named by --namespace, one scope flag and --key, all three");
    const auto whole = key.build().digest();
    return digest(whole.begin(), whole.end());
}

std::string hex(std::span<const std::byte> d) {
    std::string out;
    out.reserve(2 * d.size());
    for (const std::byte b : d) out += fmt::format("{:02x}", static_cast<unsigned>(b));
    return out;
}

std::string utc(time_point t) {
    // The store clamps times it cannot represent ('infinity', rows past 2262).
    if (t == time_point::max()) return "after " + utc(t - std::chrono::nanoseconds(1));
    if (t == time_point::min()) return "before " + utc(t + std::chrono::nanoseconds(1));
    const auto ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t seconds = static_cast<std::time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
    std::tm parts{};
    if (gmtime_r(&seconds, &parts) == nullptr) return fmt::format("{} ms since the epoch", ms);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", parts.tm_year + 1900, parts.tm_mon + 1,
                       parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, (ms % 1000 + 1000) % 1000);
}

std::string state_of(const record_state& r) {
    const char* kind = r.completed ? "completed" : "in flight";
    return r.expired() ? fmt::format("expired (was {})", kind) : std::string(kind);
}

std::string names_of(const digest& d) {
    return fmt::format("key hash {} ({} {})", hex(std::span(d).first(8)), d.size() == 32 ? "digest" : "SQL key_hash",
                       hex(d));
}

void print_record(std::ostream& out, const digest& d, const record_state& r, bool on_redis) {
    const auto line = [&](std::string_view label, const std::string& value) {
        out << fmt::format("{:<16}{}\n", std::string(label) + ":", value);
    };
    line("key hash", hex(std::span(d).first(8)));
    if (d.size() == 32) line("digest", hex(d));
    if (!on_redis) line("SQL key_hash", hex(std::span(d).first(16)));
    line("namespace", r.name_space);
    line("state", state_of(r));
    if (!on_redis) line("created", utc(r.created_at));
    line(r.completed ? "retained until" : "lease until", utc(r.expires_at));
    if (r.expired())
        line("expired", describe(detail::saturating_difference(r.now, r.expires_at)) + " ago");
    else
        line(r.completed ? "retention left" : "lease left",
             describe(detail::saturating_difference(r.expires_at, r.now)));
    line("payload", r.completed ? fmt::format("{} bytes", r.payload_bytes) : std::string("none (in flight)"));
}

void print_listed(std::ostream& out, const std::vector<listed_record>& rows) {
    out << fmt::format("{:<18}{:<34}{:<25}{:<26}{:<26}{}\n", "key hash", "SQL key_hash", "state", "created", "expires",
                       "payload");
    for (const listed_record& l : rows) {
        const auto& r = l.state;
        out << fmt::format("{:<18}{:<34}{:<25}{:<26}{:<26}{}\n", hex(std::span(l.key_hash).first(8)), hex(l.key_hash),
                           state_of(r), utc(r.created_at), utc(r.expires_at),
                           r.completed ? fmt::format("{} bytes", r.payload_bytes) : std::string("-"));
    }
}

}  // namespace idem::cli
