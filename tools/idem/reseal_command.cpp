// `idem reseal --db URL --keys FILE`: every stored result sealed again under
// the ring's first key, in batches (idem/reseal.hpp), while services run.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "admin_commands.hpp"
#include "database_arg.hpp"
#include "idem/reseal.hpp"

namespace idem::cli {
namespace {

struct reseal_args {
    std::string url;
    std::string keys_file;
    std::int64_t batch = 500;  // signed: CLI11 would read "-1" into an unsigned as a huge count
    bool progress = false;
};

void reseal(const reseal_args& args) {
    // The ring first: a file that does not parse changes nothing.
    const encryption_keys keys = encryption_keys::from_file(args.keys_file);
    const database_url db = parse_database_url(args.url);
    on_database(db, [&] {
        const opened_store store = open_store(db, open_mode::existing);
        const bool show = args.progress || ::isatty(STDERR_FILENO) == 1;
        const reseal_result r =
            idem::reseal(*store.admin, keys,
                         {.batch = static_cast<std::size_t>(args.batch), .progress = [&](const reseal_result& p) {
                              if (show) std::cerr << fmt::format("\rread {} records, resealed {}", p.read, p.resealed);
                          }});
        if (show) std::cerr << '\n';
        const double elapsed = std::chrono::duration<double>(r.elapsed).count();
        std::cout << fmt::format(
            "resealed {} of {} completed records under the key \"{}\" in {} batch{}, {:.2f}s; the rest were sealed "
            "under it already\n",
            r.resealed, r.read, keys.sealing_key_id(), r.batches, r.batches == 1 ? "" : "es", elapsed);
    });
}

}  // namespace

void add_reseal_command(CLI::App& app) {
    auto args = std::make_shared<reseal_args>();
    auto* command = app.add_subcommand(
        "reseal",
        "Seal every stored result again under the newest encryption key, in batches, each its own short "
        "transaction (run after every service has the new ring)");
    add_database_option(*command, args->url);
    command->add_option("--keys", args->keys_file, "The encryption keys file (ID:HEX lines, the sealing key first)")
        ->required();
    command->add_option("--batch", args->batch, "Records per transaction (default 500)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
    command->add_flag("--progress", args->progress, "Show progress on stderr even when it is not a terminal");
    command->callback([args] { reseal(*args); });
}

}  // namespace idem::cli
