// The SQLite store in the store registry: what idem::database::open and the
// `idem` command get for a sqlite: URL.
#include <filesystem>
#include <memory>
#include <system_error>

#include "idem/sqlite_store.hpp"
#include "idem/store_registry.hpp"
#include "sqlite_native.hpp"

namespace idem::detail::sqlite {

void register_store() {
    idem::register_store(database_url::backend::sqlite, [](const database_url& url, const store_request& request) {
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
    });
}

}  // namespace idem::detail::sqlite
