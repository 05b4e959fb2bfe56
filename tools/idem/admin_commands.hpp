// `idem migrate`, `idem purge`, `idem inspect`, `idem forget`, `idem complete`, `idem reseal`: the commands
// that open a store.
#pragma once

#include <CLI/CLI.hpp>

namespace idem::cli {

// Exit code of `inspect` and `forget` when no record has that digest (or, for
// `inspect --recent`, none is in the namespace): distinct from a database
// error (1) and a usage error (2), so a script can tell them apart.
inline constexpr int exit_not_found = 3;
// Exit code of `forget` for a record in flight, kept because --force was not given.
inline constexpr int exit_in_flight = 4;
// Exit code of `complete` when an operation in steps waited longer than
// --stuck-after for a completer (no service's completer finishes it).
inline constexpr int exit_stuck = 5;
// Exit code of `complete --compensate` for an operation that began with no
// compensation registered: nothing was changed.
inline constexpr int exit_no_compensation = 6;

void add_migrate_command(CLI::App& app);
void add_purge_command(CLI::App& app);
// `exit_code` receives exit_not_found for an unknown record.
void add_inspect_command(CLI::App& app, int& exit_code);
// `exit_code` receives exit_not_found or exit_in_flight when nothing was deleted.
void add_forget_command(CLI::App& app, int& exit_code);
// `exit_code` receives exit_stuck, exit_not_found for an operation that is not unfinished, or
// exit_no_compensation.
void add_complete_command(CLI::App& app, int& exit_code);
void add_reseal_command(CLI::App& app);

}  // namespace idem::cli
