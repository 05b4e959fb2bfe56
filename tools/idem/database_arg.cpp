#include "database_arg.hpp"

#include <filesystem>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

namespace idem::cli {

void add_database_option(CLI::App& command, std::string& url, bool required) {
    command.add_option("--db", url, fmt::format("The database: {}", database_url_forms()))->required(required);
}

std::string explain(const store_error& failure, const database_url& url) {
    // A location that is no file path (a URI, keywords) may carry a password: never repeat it.
    const std::optional<store_url_form> store = registered_store(url.scheme);
    const bool path = store && store->location_is_path;
    const std::string db = path ? url.location : "URL";
    const std::string what = failure.what();
    switch (failure.failure()) {
        case store_failure::schema:
            if (path && !std::filesystem::exists(url.location))
                return fmt::format("idem: no {} database at {}: check --db, or create it with `idem migrate --db {}`",
                                   store->display_name, url.location, url.location);
            // The library's own text names the statement and the C++ call; the operator needs the command.
            return fmt::format(
                "idem: {} has no idem schema, or an older one: create or upgrade it with "
                "`idem migrate --db {}`, then run this command again",
                path ? url.location : "the database", db);
        case store_failure::connection_lost:
            return what + "; check that the database is reachable and --db is right, then run the command again";
        case store_failure::timeout:
            return what + "; another process held the database for longer than the wait: run the command again";
        case store_failure::conflict:
        case store_failure::lost_race: return what + "; a concurrent transaction won: run the command again";
        case store_failure::corrupt_record:
            return what +
                   "; the row was not written by idem (or was changed by hand): look at it with the "
                   "database's own client";
        case store_failure::constraint:
        case store_failure::unsupported:
        case store_failure::other: break;
    }
    return what + "; check --db: the path or URL, and that it names a database you may read and write";
}

}  // namespace idem::cli
