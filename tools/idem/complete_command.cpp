// `idem complete`: the operator's side of the completer. The command knows no
// application's operations, so it cannot run one; a service's own completer
// (idem::completer, in the binary that registers its operations) does that.
// What it does: lists the unfinished operations and says when they are stuck
// (no completer finishes them: exit 5, for a timer that alerts), and hands one
// operation over: its lease ends and its fencing token moves on now, so the
// next completer pass takes it over (--expire), or compensates it (--compensate).
#include <cstdint>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "admin_commands.hpp"
#include "database_arg.hpp"
#include "duration_arg.hpp"
#include "idem/table_admin.hpp"
#include "internal/saturating_time.hpp"
#include "operation_report.hpp"
#include "record_key_flags.hpp"

namespace idem::cli {
namespace {

struct complete_args {
    std::string url;
    std::string key_hash;
    record_key_flags key;
    // Signed: CLI11 would read "-1" into an unsigned as a huge count.
    std::int64_t limit = 100;
    std::string stuck_after = "5m";
    bool expire = false;
    bool compensate = false;
};

// One line per unfinished operation, then a summary; exit_stuck when one's
// lease ended longer than --stuck-after ago.
int list(const complete_args& args) {
    const duration stuck_after = parse_duration(args.stuck_after, "--stuck-after");
    const record_key_flags& k = args.key;
    if (!args.key_hash.empty() || !k.key.empty() || k.scoped())
        throw std::invalid_argument(
            "idem: complete lists unfinished operations (of --namespace NS, if given); --key-hash, a scope flag and "
            "--key name one, with --expire or --compensate");
    const database_url db = parse_database_url(args.url);
    const auto rows = on_database(db, [&] {
        const opened_store store = open_store(db, open_mode::read_only);
        return table_admin(store).unfinished_operations(k.name_space, static_cast<std::size_t>(args.limit));
    });
    std::size_t overdue = 0, stuck = 0;
    duration longest{0};
    const auto lease = [](const operation_state& s) {
        return s.expired() ? "ended " + describe(detail::saturating_difference(s.now, s.expires_at)) + " ago"
                           : describe(detail::saturating_difference(s.expires_at, s.now)) + " left";
    };
    const std::string row = "{:<18}{:<34}{:<24}{:<14}{:<22}{:<7}{:<6}{}\n";
    if (!rows.empty())
        std::cout << fmt::format(fmt::runtime(row), "key hash", "SQL key_hash", "namespace", "state", "lease", "point",
                                 "runs", "last error");
    for (const operation_state& s : rows) {
        std::cout << fmt::format(fmt::runtime(row), s.record_id.substr(0, 16), s.record_id, s.name_space,
                                 to_string(s.phase), lease(s), s.recovery_point, s.completions,
                                 s.last_error.empty() ? "-" : s.last_error);
        if (!s.expired()) continue;
        ++overdue;
        const duration ended = detail::saturating_difference(s.now, s.expires_at);
        longest = std::max(longest, ended);
        if (ended > stuck_after) ++stuck;
    }
    std::cout << fmt::format("{} unfinished operation{}, {} with its lease ended", rows.size(),
                             rows.size() == 1 ? "" : "s", overdue);
    if (overdue > 0) std::cout << fmt::format(" (the longest {} ago)", describe(longest));
    std::cout << '\n';
    if (stuck == 0) return 0;
    std::cerr << fmt::format(
        "idem: {} operation{} waited over {} for a completer: is the service that registers {} running its "
        "completer?\n",
        stuck, stuck == 1 ? "" : "s", args.stuck_after, stuck == 1 ? "its namespace" : "their namespaces");
    return exit_stuck;
}

// --expire or --compensate on the one operation the flags name.
int hand_over(const complete_args& args) {
    const digest d = named_record(args.key_hash, args.key);
    const std::string id = operation_id(d);
    const database_url db = parse_database_url(args.url);
    const release_outcome outcome = on_database(db, [&] {
        const opened_store store = open_store(db, open_mode::existing);
        return table_admin(store).release_operation(d, args.compensate);
    });
    if (outcome == release_outcome::not_found) {
        std::cerr << "idem: no unfinished operation with " << names_of(d) << "\n";
        return exit_not_found;
    }
    if (outcome == release_outcome::no_compensation) {
        std::cerr << fmt::format(
            "idem: the operation with {} began with no compensation registered (database::steps, or an "
            "idem::operation without one): it cannot be undone, and nothing was changed; --expire hands it to the "
            "completer to run forward\n",
            names_of(d));
        return exit_no_compensation;
    }
    std::cout << fmt::format(
        "{} operation {} (SQL key_hash {}): its lease ended and its fence moved on, so the run holding it can write no "
        "step more; {}\n",
        args.compensate ? "marked to compensate" : "released", id.substr(0, 16), id,
        args.compensate ? "the next completer run undoes it with its compensation"
                        : "the next completer pass (or a retry) takes it over");
    return 0;
}

}  // namespace

void add_complete_command(CLI::App& app, int& exit_code) {
    auto args = std::make_shared<complete_args>();
    auto* command = app.add_subcommand(
        "complete",
        "List operations in steps that are unfinished (exit 5 when one waits too long for a completer), or hand one "
        "to the completer at once (--expire) or to be undone (--compensate)");
    add_database_option(*command, args->url);
    add_record_options(*command, args->key_hash, args->key);
    command->add_option("--limit", args->limit, "List at most this many, the longest overdue first (default 100)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10000}));
    command->add_option(
        "--stuck-after", args->stuck_after,
        fmt::format("Exit 5 when an operation's lease ended longer ago than this: {} (default 5m)", duration_forms));
    auto* expire = command->add_flag(
        "--expire", args->expire,
        "End the named operation's lease now and fence out the run holding it: the next completer pass takes it over");
    command
        ->add_flag("--compensate", args->compensate,
                   "The same, and mark it to compensate: the next completer run undoes it with its compensation")
        ->excludes(expire);
    command->callback(
        [args, &exit_code] { exit_code = args->expire || args->compensate ? hand_over(*args) : list(*args); });
}

}  // namespace idem::cli
