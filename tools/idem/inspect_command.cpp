#include <cstddef>
#include <cstdint>
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
#include "operation_report.hpp"
#include "record_key_flags.hpp"
#include "record_report.hpp"

namespace idem::cli {
namespace {

struct inspect_args {
    std::string url;
    std::string key_hash;
    record_key_flags key;
    bool payload = false;
    // Signed: CLI11 would read "-1" into an unsigned as a huge count.
    std::optional<std::int64_t> recent;
};

// The record and the operation in steps the digest names (either, both or none).
int inspect_one(const inspect_args& args) {
    const digest d = named_record(args.key_hash, args.key);
    const database_url db = parse_database_url(args.url);
    std::optional<record_state> record;
    std::optional<operation_state> operation;
    on_database(db, [&] {
        const opened_store store = open_store(db, open_mode::read_only);
        record = store.admin->inspect(d, args.payload);
        operation = read_operation(store, d);
    });
    if (!record && !operation) {
        std::cerr << "idem: no record or operation with " << names_of(d) << "\n";
        return exit_not_found;
    }
    // With --payload stdout carries the payload alone, byte for byte (the
    // record's, else the operation's final result); the description goes to stderr.
    std::ostream& description = args.payload ? std::cerr : std::cout;
    if (record) print_record(description, d, *record);
    if (record && operation) description << '\n';
    if (operation) print_operation(description, *operation);
    if (!args.payload) return 0;
    const std::string* payload = record ? (record->payload ? &*record->payload : nullptr)
                                        : (operation->finished() ? &operation->result : nullptr);
    if (payload != nullptr) std::cout.write(payload->data(), static_cast<std::streamsize>(payload->size()));
    std::cout.flush();
    return 0;
}

// --namespace NS --recent N: one line per record, newest first.
int inspect_recent(const inspect_args& args) {
    const std::int64_t n = *args.recent;
    if (n < 1 || n > static_cast<std::int64_t>(max_recent_records))
        throw std::invalid_argument(fmt::format("idem: --recent takes 1 to {} records, not {}", max_recent_records, n));
    const record_key_flags& k = args.key;
    if (k.name_space.empty() || !args.key_hash.empty() || !k.key.empty() || k.scoped() || args.payload)
        throw std::invalid_argument(
            "idem: --recent lists a namespace: give --namespace NS and nothing that names one record (no --key-hash, "
            "scope flag, --key or --payload)");
    const database_url db = parse_database_url(args.url);
    const auto rows = on_database(db, [&] {
        return open_store(db, open_mode::read_only).admin->recent(args.key.name_space, static_cast<std::size_t>(n));
    });
    if (rows.empty()) {
        std::cerr << "idem: no record in namespace " << args.key.name_space << "\n";
        return exit_not_found;
    }
    std::cout << fmt::format("{:<18}{:<34}{:<25}{:<26}{:<26}{}\n", "key hash", "SQL key_hash", "state", "created",
                             "expires", "payload");
    for (const listed_record& l : rows) {
        const auto& r = l.state;
        std::cout << fmt::format("{:<18}{:<34}{:<25}{:<26}{:<26}{}\n", hex(std::span(l.key_hash).first(8)),
                                 hex(l.key_hash), state_of(r), utc(r.created_at), utc(r.expires_at),
                                 r.completed ? fmt::format("{} bytes", r.payload_bytes) : std::string("-"));
    }
    return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<inspect_args>();
    auto* command = app.add_subcommand(
        "inspect",
        "Show one record (state, times, lease or retention left, payload size) and the operation in steps under its "
        "key (recovery point, each step's result and attempts), or a namespace's latest records");
    add_database_option(*command, args->url);
    add_record_options(*command, args->key_hash, args->key);
    command->add_flag("--payload", args->payload,
                      "Write the stored payload, exactly as stored, to stdout (the description goes to stderr)");
    command->add_option("--recent", args->recent,
                        fmt::format("With --namespace only: list the N records written last, newest first (N at "
                                    "most {}; reads every row of the table)",
                                    max_recent_records));
    command->callback([args, &exit_code] { exit_code = args->recent ? inspect_recent(*args) : inspect_one(*args); });
}

}  // namespace idem::cli
