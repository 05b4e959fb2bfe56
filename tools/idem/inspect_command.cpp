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
#include "redis_arg.hpp"
#include "redis_ledger.hpp"
#include "time_arg.hpp"

namespace idem::cli {
namespace {

// What --since lists when --limit is not given.
constexpr std::int64_t default_since_limit = 100;

struct inspect_args {
    std::string url;
    std::string redis;
    std::string key_hash;
    record_key_flags key;
    bool payload = false;
    // Signed: CLI11 would read "-1" into an unsigned as a huge count.
    std::optional<std::int64_t> recent;
    std::string since;
    std::optional<std::int64_t> limit;
};

// The record on the Redis ledger the key flags name. Redis keeps each record
// under its key's text, not its digest, and has no operations in steps.
std::optional<record_state> on_redis(const inspect_args& args, const digest& d) {
    if (!args.key_hash.empty())
        throw std::invalid_argument(
            "idem: a Redis ledger finds a record by its key, not its hash: name it by --namespace, one scope flag "
            "and --key");
    const redis_options options = parse_redis_url(args.redis);
    return on_redis_ledger(names_of(d), [&] { return inspect_on_redis(options, args.key.build(), args.payload); });
}

// The record and the operation in steps the digest names (either, both or none).
int inspect_one(const inspect_args& args) {
    const digest d = named_record(args.key_hash, args.key);
    std::optional<record_state> record;
    std::optional<operation_state> operation;
    if (!args.redis.empty()) {
        record = on_redis(args, d);
    } else {
        const database_url db = parse_database_url(args.url);
        on_database(db, [&] {
            const opened_store store = open_store(db, open_mode::read_only);
            record = store.admin->inspect(d, args.payload);
            operation = read_operation(store, d);
        });
    }
    if (!record && !operation) {
        std::cerr << "idem: no record " << (args.redis.empty() ? "or operation " : "") << "with " << names_of(d)
                  << "\n";
        return exit_not_found;
    }
    // With --payload stdout carries the payload alone, byte for byte (the
    // record's, else the operation's final result); the description goes to stderr.
    std::ostream& description = args.payload ? std::cerr : std::cout;
    if (record) print_record(description, d, *record, !args.redis.empty());
    if (record && operation) description << '\n';
    if (operation) print_operation(description, *operation);
    if (!args.payload) return 0;
    const std::string* payload = record ? (record->payload ? &*record->payload : nullptr)
                                        : (operation->finished() ? &operation->result : nullptr);
    if (payload != nullptr) std::cout.write(payload->data(), static_cast<std::streamsize>(payload->size()));
    std::cout.flush();
    return 0;
}

// `count` (of --recent or --limit) within 1 to max_recent_records.
std::size_t list_size(std::int64_t count, const char* flag) {
    if (count < 1 || count > static_cast<std::int64_t>(max_recent_records))
        throw std::invalid_argument(
            fmt::format("idem: {} takes 1 to {} records, not {}", flag, max_recent_records, count));
    return static_cast<std::size_t>(count);
}

// What a listing (--recent, --since) refuses: a Redis ledger, and anything
// that names one record; a scope flag unless it may be `scoped` (--since lists
// one scope's records; --recent lists a namespace).
void check_listing(const inspect_args& args, const char* flag, bool scoped) {
    if (!args.redis.empty())
        throw std::invalid_argument(fmt::format(
            "idem: {} lists a SQL store's records (--db): Redis keeps no write time and no index of a namespace, "
            "so a Redis ledger can only show one record, named by --namespace, one scope flag and --key",
            flag));
    const record_key_flags& k = args.key;
    if (k.scoped() && !scoped)
        throw std::invalid_argument(fmt::format(
            "idem: {} lists a namespace, not a scope: give --namespace alone (--since lists one scope's records), "
            "or name one record by --namespace, one scope flag and --key",
            flag));
    if (k.name_space.empty() || !args.key_hash.empty() || !k.key.empty() || args.payload)
        throw std::invalid_argument(fmt::format(
            "idem: {} lists a namespace: give --namespace NS and nothing that names one record (no --key-hash, "
            "--key or --payload)",
            flag));
}

// --namespace NS --recent N: one line per record, newest first.
int inspect_recent(const inspect_args& args) {
    const std::size_t n = list_size(*args.recent, "--recent");
    check_listing(args, "--recent", false);
    if (args.limit) throw std::invalid_argument("idem: --limit goes with --since; --recent N says how many itself");
    const database_url db = parse_database_url(args.url);
    const auto rows =
        on_database(db, [&] { return open_store(db, open_mode::read_only).admin->recent(args.key.name_space, n); });
    if (rows.empty()) {
        std::cerr << "idem: no record in namespace " << args.key.name_space << "\n";
        return exit_not_found;
    }
    print_listed(std::cout, rows);
    return 0;
}

// --namespace NS --since T [--limit N]: what the namespace completed since T,
// newest first, one line per record.
int inspect_since(const inspect_args& args) {
    if (args.recent) throw std::invalid_argument("idem: --recent and --since are two listings: give one of them");
    check_listing(args, "--since", true);
    const std::size_t n = list_size(args.limit.value_or(default_since_limit), "--limit");
    const time_point since = parse_time(args.since, clock::system()->now());
    std::optional<scope> owner;
    if (args.key.scoped()) owner = args.key.owner();
    const database_url db = parse_database_url(args.url);
    const auto rows = on_database(db, [&] {
        return open_store(db, open_mode::read_only).admin->completed_since(args.key.name_space, owner, since, n);
    });
    if (rows.empty()) {
        std::cerr << "idem: no record of namespace " << args.key.name_space
                  << (owner ? " and scope " + owner->text() : std::string()) << " completed since " << utc(since)
                  << "\n";
        return exit_not_found;
    }
    print_listed(std::cout, rows);
    return 0;
}

// `db_given`: --db was on the command line (an empty one is then refused as a bad URL).
int inspect(const inspect_args& args, bool db_given) {
    if (!db_given && args.redis.empty())
        throw std::invalid_argument("idem: name the ledger by --db (a SQL database) or by --redis, one of the two");
    if (!args.since.empty()) return inspect_since(args);
    if (args.recent) return inspect_recent(args);
    if (args.limit) throw std::invalid_argument("idem: --limit goes with --since");
    return inspect_one(args);
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<inspect_args>();
    auto* command = app.add_subcommand(
        "inspect",
        "Show one record (state, times, lease or retention left, payload size) and the operation in steps under its "
        "key (recovery point, each step's result and attempts), a namespace's latest records, or what it completed "
        "since a time");
    add_database_option(*command, args->url, false);
    command
        ->add_option("--redis", args->redis,
                     fmt::format("Or the Redis ledger: {} (the record is then named by its key)", redis_url_form))
        ->excludes("--db");
    add_record_options(*command, args->key_hash, args->key);
    command->add_flag("--payload", args->payload,
                      "Write the stored payload, exactly as stored, to stdout (the description goes to stderr)");
    command->add_option("--recent", args->recent,
                        fmt::format("With --namespace only: list the N records written last, newest first (N at "
                                    "most {}; reads every row of the table)",
                                    max_recent_records));
    command->add_option("--since", args->since,
                        fmt::format("With --namespace only: list the records completed since this time, newest "
                                    "first (SQL stores; reads the rows expiring after it through the expires_at "
                                    "index). {}",
                                    time_forms));
    command->add_option("--limit", args->limit,
                        fmt::format("With --since: list at most N records (1 to {}, default {})", max_recent_records,
                                    default_since_limit));
    command->callback([args, command, &exit_code] { exit_code = inspect(*args, command->count("--db") > 0); });
}

}  // namespace idem::cli
