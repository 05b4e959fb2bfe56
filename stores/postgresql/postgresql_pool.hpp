// The store's own connections to its database (the detached view and the
// admin calls), each with its prepared statements, lent to one thread at a time.
#pragma once

#include <memory>

#include <soci/session.h>

#include "idem/postgresql_store.hpp"
#include "internal/lending_pool.hpp"
#include "postgresql_records.hpp"

namespace idem::detail::pg {

struct pooled_connection {
    explicit pooled_connection(const postgresql_store_options& options);

    soci::session session;
    std::shared_ptr<record_statements> statements;
};

using connection_pool = lending_pool<pooled_connection>;

// A pool for the store's own connections; the first opens now, so that bad
// settings fail at construction. An idle connection whose server restarted is
// noticed before it is lent (without a round trip); one left broken or inside a
// transaction or pipeline is closed when given back.
[[nodiscard]] std::unique_ptr<connection_pool> make_pool(const postgresql_store_options& options);

}  // namespace idem::detail::pg
