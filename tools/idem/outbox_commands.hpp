// `idem relay` and `idem outbox status|dead|requeue`, in a build with
// idem::database and the HTTP sink (no_outbox_commands.cpp otherwise).
#pragma once

#include <CLI/CLI.hpp>

namespace idem::cli {

void add_outbox_commands(CLI::App& app);

}  // namespace idem::cli
