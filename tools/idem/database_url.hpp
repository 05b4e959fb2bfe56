// --db URL: which store and where, and opening it for the admin commands.
//   sqlite:PATH, sqlite:///ABSOLUTE/PATH, PATH.db, PATH.sqlite, PATH.sqlite3
//   postgresql://... or postgres://... (a libpq connection URI)
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <string_view>

#include "idem/store_admin.hpp"

namespace idem::cli {

inline constexpr std::string_view database_url_forms =
    "sqlite:PATH, a path ending in .db, .sqlite or .sqlite3, or a postgresql:// (postgres://) URI";

struct database_url {
    enum class backend { sqlite, postgresql };
    backend kind;
    std::string location;  // the SQLite file, or the whole PostgreSQL URI
};

// Adds the required --db option of a command that opens a store.
void add_database_option(CLI::App& command, std::string& url);

// std::invalid_argument naming the accepted forms for anything else. The
// message never repeats the value: a URI may carry a password.
[[nodiscard]] database_url parse_database_url(std::string_view text);

enum class open_mode {
    create,    // migrate: a missing SQLite file is created
    existing,  // purge, inspect: a missing SQLite file is a store_error, not a new empty database
};

// The store behind `url`, not migrated. store_error when it cannot be opened;
// std::invalid_argument when this build has no store for it.
[[nodiscard]] std::unique_ptr<store_admin> open_store(const database_url& url, open_mode mode);

// The stores' openers: open_<store>.cpp, each built (and IDEM_CLI_<STORE> set)
// when the build has that store.
[[nodiscard]] std::unique_ptr<store_admin> open_sqlite(const std::string& path, open_mode mode);
[[nodiscard]] std::unique_ptr<store_admin> open_postgresql(const std::string& uri, open_mode mode);

}  // namespace idem::cli
