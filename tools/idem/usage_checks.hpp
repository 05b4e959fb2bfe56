// Usage errors CLI11 does not report in the operator's terms: arguments that
// are not UTF-8 (CLI11 passes any bytes), and a command that does not exist
// (CLI11 says only that a subcommand is required).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace idem::cli {

// The message for the first argument of argv[1..argc) that is not UTF-8, or none.
[[nodiscard]] std::optional<std::string> non_utf8_argument(int argc, const char* const* argv);

// The message for an unknown command: the first word, where `app` or one of
// its subcommands expects a subcommand, that names none of them.
[[nodiscard]] std::optional<std::string> unknown_command(const CLI::App& app, int argc, const char* const* argv);

}  // namespace idem::cli
