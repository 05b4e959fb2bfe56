// The SQLite store in the store registry: the URLs it answers (sqlite:PATH, a
// path ending in .db, .sqlite or .sqlite3) and what idem::database::open and
// the `idem` command get for them.
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "idem/sqlite_store.hpp"
#include "idem/store_registry.hpp"
#include "sqlite_native.hpp"

namespace idem::detail::sqlite {
namespace {

constexpr std::string_view scheme = "sqlite:";

bool has_sqlite_extension(std::string_view path) {
    return path.ends_with(".db") || path.ends_with(".sqlite") || path.ends_with(".sqlite3");
}

// The file a sqlite: URL or a bare path names.
std::string path_of(std::string_view text) {
    if (!text.starts_with(scheme)) return std::string(text);
    std::string_view path = text.substr(scheme.size());
    // sqlite:///var/lib/app.db: an empty authority before an absolute path.
    if (path.starts_with("//")) {
        if (!path.starts_with("///"))
            throw std::invalid_argument("URL sqlite:// needs an absolute path (sqlite:///PATH)");
        path.remove_prefix(2);
    }
    if (path.empty()) throw std::invalid_argument("URL sqlite: needs a path");
    if (path == ":memory:")
        throw std::invalid_argument("cannot be :memory: (each pooled connection would open its own empty database)");
    return std::string(path);
}

opened_store open(const database_url& url, const store_request& request) {
    std::error_code ec;
    if (request.access != store_access::create && !std::filesystem::exists(url.location, ec))
        throw store_error(store_failure::schema, "idem: no SQLite database at " + url.location);
    sqlite_connection_options connection = request.sqlite;
    connection.read_only = connection.read_only || request.access == store_access::read_only;
    auto store = std::make_shared<sqlite_store>(sqlite_store_options{
        .path = url.location, .connection = connection, .pool_size = request.pool_size, .migrate_on_open = false});
    store_admin* admin = store.get();
    return opened_store{std::move(store), admin, [path = url.location, connection](soci::session& s) {
                            open_sqlite_session(s, path, connection);
                        }};
}

}  // namespace

void register_store() {
    idem::register_store({.scheme = "sqlite",
                          .display_name = "SQLite",
                          .prefixes = {std::string(scheme)},
                          .recognises = has_sqlite_extension,
                          .location = path_of,
                          .description = "sqlite:PATH (or sqlite:///ABSOLUTE/PATH) or a path ending in .db, .sqlite "
                                         "or .sqlite3",
                          .location_is_path = true},
                         open);
}

}  // namespace idem::detail::sqlite
