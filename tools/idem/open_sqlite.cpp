// Opens the SQLite store for the admin commands.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "database_arg.hpp"
#include "idem/error.hpp"
#include "idem/sqlite_store.hpp"

namespace idem::cli {

std::unique_ptr<store_admin> open_sqlite(const std::string& path, open_mode mode) {
    std::error_code ec;
    if (mode != open_mode::create && !std::filesystem::exists(path, ec))
        throw command_error(fmt::format(
            "idem: no SQLite database at {}: check --db, or create it with `idem migrate --db {}`", path, path));
    sqlite_store_options options;
    options.path = path;
    // An operator's job may wait for busy writers longer than a request would.
    options.connection.busy_timeout = std::chrono::seconds(30);
    options.pool_size = 1;
    options.migrate_on_open = false;
    options.connection.read_only = mode == open_mode::read_only;
    return std::make_unique<sqlite_store>(std::move(options));
}

}  // namespace idem::cli
