#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "admin_commands.hpp"
#include "database_arg.hpp"
#include "duration_arg.hpp"
#include "internal/saturating_time.hpp"
#include "record_key_flags.hpp"
#include "record_report.hpp"

namespace idem::cli {
namespace {

struct forget_args {
    std::string url;
    std::string key_hash;
    record_key_flags key;
    bool force = false;
};

int forget(const forget_args& args) {
    const digest d = named_record(args.key_hash, args.key);
    const database_url db = parse_database_url(args.url);
    const forget_result r =
        on_database(db, [&] { return open_store(db, open_mode::existing).admin->forget(d, args.force); });
    switch (r.outcome) {
        case forget_outcome::not_found:
            std::cerr << "idem: no record with " << names_of(d) << "; nothing was deleted\n";
            return exit_not_found;
        case forget_outcome::refused_in_flight:
            std::cerr << fmt::format(
                "idem: the record with {} is in flight (lease left {}): its request may still be running, and a "
                "request with its key after a delete runs the operation again. Nothing was deleted; wait for the "
                "lease to end, or add --force to delete it anyway\n",
                names_of(d), describe(detail::saturating_difference(r.record.expires_at, r.record.now)));
            return exit_in_flight;
        case forget_outcome::deleted: break;
    }
    // One line an operator's log keeps: what was deleted, by its hashes only.
    std::cout << fmt::format("deleted the record with {}: namespace {}, {}, written {}{}\n", names_of(d),
                             r.record.name_space, state_of(r.record), utc(r.record.created_at),
                             !r.record.completed && !r.record.expired() ? " (--force)" : "");
    return 0;
}

}  // namespace

void add_forget_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<forget_args>();
    auto* command = app.add_subcommand(
        "forget", "Delete one record (a stuck key, or one used by mistake); a request with its key then runs anew");
    add_database_option(*command, args->url);
    command->add_option("--key-hash", args->key_hash,
                        "The record's digest: 64 hex characters (SHA-256 of its storage key), or the 32 of its "
                        "first 16 bytes, the key_hash a SQL table shows");
    args->key.add_to(*command, false);
    command->add_flag("--force", args->force,
                      "Delete the record even while it is in flight (its request may still be running)");
    command->callback([args, &exit_code] { exit_code = forget(*args); });
}

}  // namespace idem::cli
