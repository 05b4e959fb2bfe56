// The PostgreSQL store in the store registry: what idem::database::open and
// the `idem` command get for a postgresql:// URL or libpq keywords.
#include <soci/session.h>

#include <memory>
#include <string>

#include "idem/postgresql_store.hpp"
#include "idem/store_registry.hpp"
#include "postgresql_native.hpp"

namespace idem::detail::pg {

void register_store() {
    // The database must exist already: store_access changes nothing but read_only,
    // which the store has no use for (its reads take no write lock).
    idem::register_store(database_url::backend::postgresql, [](const database_url& url, const store_request& request) {
        const postgresql_store_options options{.connection = url.location,
                                               .pool_size = request.pool_size,
                                               .migrate_on_open = false,
                                               .transaction_pooler = request.transaction_pooler};
        auto store = std::make_shared<postgresql_store>(options);
        store_admin* admin = store.get();
        // A business transaction waits for a row lock no longer than the store's own
        // statements do (its record shares that transaction in once()). Behind a
        // transaction pooler a SET would stay on whichever server connection ran it.
        const long long lock_timeout_ms = options.transaction_pooler ? 0 : options.lock_timeout.count();
        return opened_store{std::move(store), admin, [connection = url.location, lock_timeout_ms](soci::session& s) {
                                open_postgresql_session(s, connection);
                                if (lock_timeout_ms > 0) s << "SET lock_timeout = " + std::to_string(lock_timeout_ms);
                            }};
    });
}

}  // namespace idem::detail::pg
