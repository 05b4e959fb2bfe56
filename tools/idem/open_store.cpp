// The store a --db URL names, in builds that have it (IDEM_CLI_<STORE>).
#include <stdexcept>

#include "database_arg.hpp"

namespace idem::cli {

std::unique_ptr<store_admin> open_store(const database_url& url, open_mode mode) {
    switch (url.kind) {
        case database_url::backend::sqlite:
#if IDEM_CLI_SQLITE
            return open_sqlite(url.location, mode);
#else
            throw std::invalid_argument(
                "idem: this build has no SQLite store (it was built without SOCI's sqlite3 backend)");
#endif
        case database_url::backend::postgresql:
#if IDEM_CLI_POSTGRESQL
            return open_postgresql(url.location, mode);
#else
            throw std::invalid_argument(
                "idem: this build has no PostgreSQL store (it was built without libpq or SOCI's "
                "postgresql backend)");
#endif
    }
    throw std::invalid_argument("idem: unknown database kind");
}

}  // namespace idem::cli
