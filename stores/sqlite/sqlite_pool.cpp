#include "sqlite_pool.hpp"

namespace idem::detail::sqlite {

pooled_connection::pooled_connection(const std::string& path, const sqlite_connection_options& options) {
    open_sqlite_session(session, path, options);
    runner = std::make_unique<transaction_runner>(session);
}

std::unique_ptr<connection_pool> make_pool(const std::string& path, const sqlite_connection_options& options,
                                           std::size_t size) {
    // A connection whose rollback failed is discarded by the store through its lease.
    return std::make_unique<connection_pool>(size, connection_pool::policy{.open = [path, options] {
                                                 return std::make_unique<pooled_connection>(path, options);
                                             }});
}

}  // namespace idem::detail::sqlite
