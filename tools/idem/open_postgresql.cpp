// Opens the PostgreSQL store for the admin commands.
#include <memory>
#include <string>

#include "database_arg.hpp"
#include "idem/postgresql_store.hpp"

namespace idem::cli {

// The database must exist already, so `mode` changes nothing here.
std::unique_ptr<store_admin> open_postgresql(const std::string& uri, open_mode /*mode*/) {
    postgresql_store_options options;
    options.connection = uri;
    options.pool_size = 1;
    options.migrate_on_open = false;
    return std::make_unique<postgresql_store>(std::move(options));
}

}  // namespace idem::cli
