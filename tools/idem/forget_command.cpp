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
#include "redis_arg.hpp"
#include "redis_ledger.hpp"

namespace idem::cli {
namespace {

struct forget_args {
    std::string url;
    std::string redis;
    std::string key_hash;
    record_key_flags key;
    bool force = false;
};

// Redis keeps each record under its key's text, not its digest: the key names it.
forget_result on_redis(const forget_args& args, const digest& d) {
    if (!args.key_hash.empty())
        throw std::invalid_argument(
            "idem: a Redis ledger finds a record by its key, not its hash: name it by --namespace, one scope flag "
            "and --key");
    const redis_options options = parse_redis_url(args.redis);
    return on_redis_ledger(names_of(d), [&] { return forget_on_redis(options, args.key.build(), args.force); });
}

int forget(const forget_args& args) {
    if (args.url.empty() == args.redis.empty())
        throw std::invalid_argument("idem: name the ledger by --db (a SQL database) or by --redis, one of the two");
    const digest d = named_record(args.key_hash, args.key);
    forget_result r;
    if (!args.redis.empty()) {
        r = on_redis(args, d);
    } else {
        const database_url db = parse_database_url(args.url);
        r = on_database(db, [&] { return open_store(db, open_mode::existing).admin->forget(d, args.force); });
    }
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
        case forget_outcome::tombstone_deleted:
            // The result was gone; the key was remembered (its profile's remember window).
            std::cout << fmt::format(
                "deleted the tombstone with {}: the key was remembered until {}; a request with it runs again\n",
                names_of(d), utc(r.record.expires_at));
            return 0;
        case forget_outcome::deleted: break;
    }
    // One line an operator's log keeps: what was deleted, by its hashes only.
    // Redis keeps no write time.
    const std::string written = args.redis.empty() ? ", written " + utc(r.record.created_at) : "";
    std::cout << fmt::format("deleted the record with {}: namespace {}, {}{}{}{}\n", names_of(d), r.record.name_space,
                             state_of(r.record), written,
                             !r.record.completed && !r.record.expired() ? " (--force)" : "",
                             r.tombstone ? ", and its tombstone" : "");
    return 0;
}

}  // namespace

void add_forget_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<forget_args>();
    auto* command = app.add_subcommand(
        "forget", "Delete one record (a stuck key, or one used by mistake); a request with its key then runs anew");
    add_database_option(*command, args->url, false);
    command
        ->add_option("--redis", args->redis,
                     fmt::format("Or the Redis ledger: {} (the record is then named by its key)", redis_url_form))
        ->excludes("--db");
    add_record_options(*command, args->key_hash, args->key);
    command->add_flag("--force", args->force,
                      "Delete the record even while it is in flight (its request may still be running)");
    command->callback([args, &exit_code] { exit_code = forget(*args); });
}

}  // namespace idem::cli
