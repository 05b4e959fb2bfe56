#include "usage_checks.hpp"

#include <string_view>

#include <fmt/format.h>

#include "internal/text.hpp"

namespace idem::cli {

std::optional<std::string> non_utf8_argument(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i)
        if (!detail::is_valid_utf8(argv[i]))
            return fmt::format("idem: argument {} is not UTF-8; give keys, ids and paths as UTF-8 text", i);
    return std::nullopt;
}

std::optional<std::string> unknown_command(const CLI::App& app, int argc, const char* const* argv) {
    const CLI::App* current = &app;
    std::string path = "idem";
    for (int i = 1; i < argc; ++i) {
        const std::string_view word = argv[i];
        // Past the first option the words may be its values: CLI11 judges those.
        if (word.starts_with("-") || current->get_require_subcommand_min() == 0) return std::nullopt;
        const auto named = current->get_subcommands([&](const CLI::App* sub) { return sub->check_name(argv[i]); });
        if (named.empty()) {
            std::string names;
            for (const CLI::App* sub : current->get_subcommands([](const CLI::App*) { return true; }))
                names += (names.empty() ? "" : ", ") + sub->get_name();
            return fmt::format("idem: unknown command '{} {}'; the commands are {} (`{} --help`)", path, word, names,
                               path);
        }
        current = named.front();
        path += " " + current->get_name();
    }
    return std::nullopt;
}

}  // namespace idem::cli
