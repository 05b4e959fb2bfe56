// `idem key ...`: derive, hash and check keys from the command line.
#pragma once

#include <CLI/CLI.hpp>

namespace idem::cli {

// Registers the `key` subcommands on `app`; `exit_code` receives their result.
void add_key_commands(CLI::App& app, int& exit_code);

}  // namespace idem::cli
