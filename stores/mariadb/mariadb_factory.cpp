// The MariaDB store in the store registry: the URLs it answers (mariadb://
// and mysql://) and what idem::database::open and the `idem` command get for them.
#include <soci/session.h>

#include <memory>
#include <string>

#include "idem/mariadb_store.hpp"
#include "idem/store_registry.hpp"
#include "mariadb_native.hpp"

namespace idem::detail::mariadb {
namespace {

// The database must exist already: store_access changes nothing but
// read_only, which the store has no use for (its reads take no write lock).
opened_store open(const database_url& url, const store_request& request) {
    const mariadb_store_options options{.connection = url.location,
                                        .pool_size = request.pool_size,
                                        .migrate_on_open = false,
                                        .answer_timeout = request.answer_timeout};
    auto store = std::make_shared<mariadb_store>(options);
    store_admin* admin = store.get();
    // A business transaction waits for a row lock no longer than the store's own statements do.
    return opened_store{std::move(store), admin,
                        [connection = url.location, wait = options.lock_wait_timeout](soci::session& s) {
                            open_mariadb_session(s, connection, wait);
                        }};
}

}  // namespace

void register_store() {
    // The location is the URL whole; it may carry a password, so it is never repeated.
    idem::register_store({.scheme = "mariadb",
                          .display_name = "MariaDB",
                          .prefixes = {"mariadb://", "mysql://"},
                          .location =
                              [](std::string_view text) {
                                  (void)soci_connection_string(text);  // malformed: std::invalid_argument
                                  return std::string(text);
                              },
                          .description = "mariadb://... or mysql://... (docs/mariadb.md)"},
                         open);
}

}  // namespace idem::detail::mariadb
