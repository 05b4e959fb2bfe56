#include "database_url.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace idem::cli {

namespace {

[[noreturn]] void reject(std::string_view why) {
    throw std::invalid_argument(fmt::format("idem: --db {}; use {}", why, database_url_forms));
}

bool is_scheme(std::string_view s) {
    return !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") ==
                             std::string_view::npos;
}

bool has_sqlite_extension(std::string_view path) {
    return path.ends_with(".db") || path.ends_with(".sqlite") || path.ends_with(".sqlite3");
}

}  // namespace

void add_database_option(CLI::App& command, std::string& url) {
    command.add_option("--db", url, fmt::format("The database: {}", database_url_forms))->required();
}

database_url parse_database_url(std::string_view text) {
    using enum database_url::backend;
    if (text.empty()) reject("is empty");
    if (text.starts_with("postgresql://") || text.starts_with("postgres://")) return {postgresql, std::string(text)};
    if (text.starts_with("sqlite:")) {
        std::string_view path = text.substr(7);
        // sqlite:///var/lib/app.db: an empty authority before an absolute path.
        if (path.starts_with("//")) {
            if (!path.starts_with("///")) reject("sqlite:// needs an absolute path (sqlite:///PATH)");
            path.remove_prefix(2);
        }
        if (path.empty()) reject("sqlite: needs a path");
        return {sqlite, std::string(path)};
    }
    if (const auto colon = text.find("://"); colon != std::string_view::npos && is_scheme(text.substr(0, colon)))
        reject(fmt::format("has an unknown scheme '{}'", text.substr(0, colon)));
    if (has_sqlite_extension(text)) return {sqlite, std::string(text)};
    reject("is not a database URL");
}

}  // namespace idem::cli
