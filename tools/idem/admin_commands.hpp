// `idem migrate`, `idem purge`, `idem inspect`: the commands that open a store.
#pragma once

#include <CLI/CLI.hpp>

namespace idem::cli {

// Exit code of `inspect` when no record has that digest: distinct from a
// database error (1) and a usage error (2), so a script can tell them apart.
inline constexpr int exit_not_found = 3;

void add_migrate_command(CLI::App& app);
void add_purge_command(CLI::App& app);
// `exit_code` receives exit_not_found for an unknown record.
void add_inspect_command(CLI::App& app, int& exit_code);

}  // namespace idem::cli
