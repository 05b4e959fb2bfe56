#include <cstddef>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "admin_commands.hpp"
#include "database_arg.hpp"
#include "digest_arg.hpp"
#include "duration_arg.hpp"
#include "idem/record_key.hpp"
#include "internal/saturating_time.hpp"
#include "record_key_flags.hpp"

namespace idem::cli {
namespace {

// A whole digest, or its first 16 bytes (the SQL tables' key_hash).
using digest = std::vector<std::byte>;

struct inspect_args {
    std::string url;
    std::string key_hash;
    record_key_flags key;
    bool payload = false;
};

digest target(const inspect_args& args) {
    const bool by_hash = !args.key_hash.empty();
    if (by_hash == args.key.given())
        throw std::invalid_argument(
            "idem: name the record either by --key-hash or by --namespace, one scope flag and --key");
    if (by_hash) return parse_digest(args.key_hash);
    if (args.key.name_space.empty() || args.key.key.empty())
        throw std::invalid_argument("idem: a record is named by --namespace, one scope flag and --key, all three");
    const auto whole = args.key.build().digest();
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

// The description; names the record by its hash only, never by key or scope.
void print_record(std::ostream& out, const digest& d, const record_state& r) {
    const char* kind = r.completed ? "completed" : "in flight";
    const auto line = [&](std::string_view label, const std::string& value) {
        out << fmt::format("{:<16}{}\n", std::string(label) + ":", value);
    };
    line("key hash", hex(std::span(d).first(8)));
    if (d.size() == 32) line("digest", hex(d));
    line("SQL key_hash", hex(std::span(d).first(16)));
    line("namespace", r.name_space);
    line("state", r.expired() ? fmt::format("expired (was {})", kind) : std::string(kind));
    line("created", utc(r.created_at));
    line(r.completed ? "retained until" : "lease until", utc(r.expires_at));
    if (r.expired())
        line("expired", describe(detail::saturating_difference(r.now, r.expires_at)) + " ago");
    else
        line(r.completed ? "retention left" : "lease left",
             describe(detail::saturating_difference(r.expires_at, r.now)));
    line("payload", r.completed ? fmt::format("{} bytes", r.payload_bytes) : std::string("none (in flight)"));
}

int inspect(const inspect_args& args) {
    const digest d = target(args);
    const database_url db = parse_database_url(args.url);
    const auto record = on_database(db, [&] { return open_store(db, open_mode::read_only)->inspect(d, args.payload); });
    if (!record) {
        std::cerr << "idem: no record with key hash " << hex(std::span(d).first(8)) << " ("
                  << (d.size() == 32 ? "digest " : "SQL key_hash ") << hex(d) << ")\n";
        return exit_not_found;
    }
    if (!args.payload) {
        print_record(std::cout, d, *record);
        return 0;
    }
    // stdout carries the payload alone, byte for byte; the description goes to stderr.
    print_record(std::cerr, d, *record);
    if (record->payload)
        std::cout.write(record->payload->data(), static_cast<std::streamsize>(record->payload->size()));
    std::cout.flush();
    return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<inspect_args>();
    auto* command =
        app.add_subcommand("inspect", "Show one record: state, times, lease or retention left, payload size");
    add_database_option(*command, args->url);
    command->add_option("--key-hash", args->key_hash,
                        "The record's digest: 64 hex characters (SHA-256 of its storage key), or the 32 of its "
                        "first 16 bytes, the key_hash a SQL table shows");
    args->key.add_to(*command, false);
    command->add_flag("--payload", args->payload,
                      "Write the stored payload, exactly as stored, to stdout (the description goes to stderr)");
    command->callback([args, &exit_code] { exit_code = inspect(*args); });
}

}  // namespace idem::cli
