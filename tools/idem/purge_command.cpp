#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include "admin_commands.hpp"
#include "database_arg.hpp"
#include "duration_arg.hpp"
#include "idem/purge.hpp"
#include "idem/table_admin.hpp"

namespace idem::cli {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct purge_args {
    std::string url;
    // Signed: CLI11 would read "-1" into an unsigned as a huge count.
    std::int64_t batch = 1000;
    std::int64_t max_rows = 0;  // 0: no bound
    bool dry_run = false;
    bool progress = false;
    std::string older_than = "0s";
};

double seconds_since(steady::time_point start) {
    return std::chrono::duration<double>(steady::now() - start).count();
}

// One line on stderr, rewritten in place (carriage return, then padding over
// what the previous one left), at most ten times a second. "About N left" are
// the expired rows still in the database, --max-rows or not; the time is what
// this run still needs.
class progress_line {
public:
    progress_line(std::size_t expired, std::size_t bound, steady::time_point start)
        : expired_(expired), to_delete_(std::min(expired, bound)), start_(start) {}

    void update(std::size_t deleted, bool last) {
        const auto now = steady::now();
        if (!last && now - shown_ < 100ms) return;
        shown_ = now;
        const double elapsed = seconds_since(start_);
        const double rate = elapsed > 0 ? static_cast<double>(deleted) / elapsed : 0;
        const std::size_t left = expired_ > deleted ? expired_ - deleted : 0;
        const std::size_t this_run = to_delete_ > deleted ? to_delete_ - deleted : 0;
        std::string line = fmt::format("deleted {} rows, {:.0f} rows/s, about {} left", deleted, rate, left);
        if (this_run > 0 && rate > 0) line += fmt::format(" (~{:.0f}s)", static_cast<double>(this_run) / rate);
        const std::size_t width = line.size();
        line.resize(std::max(width, width_), ' ');
        width_ = width;
        std::cerr << '\r' << line << (last ? "\n" : "") << std::flush;
    }

private:
    std::size_t expired_;
    std::size_t to_delete_;
    steady::time_point start_;
    steady::time_point shown_{};
    std::size_t width_ = 0;
};

std::size_t purge(store_admin& store, const purge_args& args, duration older_than) {
    const std::size_t batch = static_cast<std::size_t>(args.batch);
    const std::size_t bound =
        args.max_rows == 0 ? std::numeric_limits<std::size_t>::max() : static_cast<std::size_t>(args.max_rows);
    const std::string age = older_than > duration::zero() ? " for over " + args.older_than : "";

    if (args.dry_run) {
        const std::size_t expired = store.count_expired(older_than);
        std::cout << fmt::format("would purge {} rows expired{}", std::min(expired, bound), age);
        if (expired > bound) std::cout << fmt::format(" (of {}; --max-rows)", expired);
        std::cout << '\n';
        return std::min(expired, bound);
    }

    std::optional<progress_line> progress;
    if (args.progress || ::isatty(STDERR_FILENO) == 1)
        progress.emplace(store.count_expired(older_than), bound, steady::now());
    // The library's purge loop: batches, the bound, the rest between batches.
    const purge_result r = idem::purge(store, {.batch = batch,
                                               .max_rows = args.max_rows == 0 ? std::nullopt : std::optional(bound),
                                               .older_than = older_than,
                                               .progress = [&](const purge_progress& p) {
                                                   if (progress) progress->update(p.deleted, false);
                                               }});
    const std::size_t deleted = r.deleted, batches = r.batches;
    if (progress) progress->update(deleted, true);
    const double elapsed = std::chrono::duration<double>(r.elapsed).count();
    std::cout << fmt::format("purged {} rows expired{} in {} batch{}, {:.2f}s ({:.0f} rows/s){}\n", deleted, age,
                             batches, batches == 1 ? "" : "es", elapsed,
                             elapsed > 0 ? static_cast<double>(deleted) / elapsed : 0.0,
                             r.stopped_at_max_rows ? "; stopped at --max-rows" : "");
    return deleted;
}

// A table beside the records that a purge empties of what is done: its rows
// (their children go with them) in the rows it purges and counts.
struct purged_table {
    std::string_view rows;  // "delivered outbox messages"
    std::function<std::size_t()> count;
    std::function<std::size_t(std::size_t limit)> purge;
};

// Purges `table` through the library's loop, each batch (and a dry run's
// count) its own transaction, at most `budget` rows (what --max-rows left);
// a line only when there are any. Returns the rows it deleted.
std::size_t purge_table(const purge_args& args, const purged_table& table, std::size_t budget) {
    if (budget == 0) return 0;
    if (args.dry_run) {
        const std::size_t n = table.count();
        if (n > 0) std::cout << fmt::format("would purge {} {}\n", std::min(n, budget), table.rows);
        return std::min(n, budget);
    }
    const purge_result r = purge_batches([&](std::size_t limit, duration) { return table.purge(limit); },
                                         {.batch = static_cast<std::size_t>(args.batch),
                                          .max_rows = args.max_rows == 0 ? std::nullopt : std::optional(budget)});
    if (r.deleted == 0) return 0;
    const double elapsed = std::chrono::duration<double>(r.elapsed).count();
    std::cout << fmt::format("purged {} {} in {} batch{}, {:.2f}s ({:.0f} rows/s)\n", r.deleted, table.rows, r.batches,
                             r.batches == 1 ? "" : "es", elapsed,
                             elapsed > 0 ? static_cast<double>(r.deleted) / elapsed : 0.0);
    return r.deleted;
}

void purge(const purge_args& args) {
    const duration older_than = parse_duration(args.older_than, "--older-than");
    const database_url db = parse_database_url(args.url);
    // A dry run opens the database read-only: it changes nothing, not even the journal mode.
    on_database(db, [&] {
        const opened_store store = open_store(db, args.dry_run ? open_mode::read_only : open_mode::existing);
        // --max-rows bounds the rows of all three together: records first, then
        // delivered outbox messages, then finished operations in steps (one row
        // each: an operation's steps go with it, never an unfinished one).
        std::size_t budget =
            args.max_rows == 0 ? std::numeric_limits<std::size_t>::max() : static_cast<std::size_t>(args.max_rows);
        budget -= std::min(budget, purge(*store.admin, args, older_than));
        table_admin tables(store);
        budget -= std::min(
            budget,
            purge_table(
                args,
                {.rows = "delivered outbox messages",
                 .count = [&] { return tables.count_delivered_messages(older_than); },
                 .purge = [&](std::size_t limit) { return tables.purge_delivered_messages(limit, older_than); }},
                budget));
        (void)purge_table(args,
                          {.rows = "expired operations",
                           .count = [&] { return tables.count_expired_operations(older_than); },
                           .purge = [&](std::size_t limit) { return tables.purge_operations(limit, older_than); }},
                          budget);
    });
}

}  // namespace

void add_purge_command(CLI::App& app) {
    auto args = std::make_shared<purge_args>();
    auto* command =
        app.add_subcommand("purge", "Delete expired records in bounded batches, each its own short transaction");
    add_database_option(*command, args->url);
    command->add_option("--batch", args->batch, "Rows per transaction (default 1000)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
    command->add_option("--max-rows", args->max_rows, "Stop after deleting this many rows (default: no bound)")
        ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
    command->add_flag("--dry-run", args->dry_run, "Count the rows a purge would delete; delete nothing");
    command->add_flag("--progress", args->progress, "Show progress on stderr even when it is not a terminal");
    command->add_option("--older-than", args->older_than,
                        fmt::format("Only rows expired at least this long ago: {} (default 0s)", duration_forms));
    command->callback([args] { purge(*args); });
}

}  // namespace idem::cli
