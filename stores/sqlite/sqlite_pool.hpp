// The store's own connections to its database file, each with its runner
// (and so its prepared statements), lent to one thread at a time.
#pragma once

#include <memory>
#include <string>

#include <soci/session.h>

#include "idem/sqlite_store.hpp"
#include "idem/transaction_runner.hpp"
#include "internal/lending_pool.hpp"
#include "sqlite_records.hpp"

namespace idem::detail::sqlite {

struct pooled_connection {
    pooled_connection(const std::string& path, const sqlite_connection_options& options);

    soci::session session;
    std::unique_ptr<transaction_runner> runner;  // declared after the session: dies first
    // Statements run outside any transaction (autocommit reads); prepared on first use.
    std::unique_ptr<record_statements> reader;
};

using connection_pool = lending_pool<pooled_connection>;

// A pool on `path`; its first connection opens now, so a bad path fails here.
[[nodiscard]] std::unique_ptr<connection_pool> make_pool(const std::string& path,
                                                         const sqlite_connection_options& options, std::size_t size);

}  // namespace idem::detail::sqlite
