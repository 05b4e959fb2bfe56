// The store's own connections to its database (the detached view and the
// admin calls), each with its prepared statements, lent to one thread at a time.
// A connection found broken is closed, and the next caller opens a new one, so
// the store recovers by itself after a server restart.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <soci/session.h>

#include "idem/postgresql_store.hpp"
#include "postgresql_records.hpp"

namespace idem::detail::pg {

struct pooled_connection {
    explicit pooled_connection(const postgresql_store_options& options);

    soci::session session;
    std::shared_ptr<record_statements> statements;
};

class connection_pool {
public:
    // Opens the first connection now, so that bad settings fail at construction.
    explicit connection_pool(const postgresql_store_options& options);

    class lease {
    public:
        lease(connection_pool& pool, pooled_connection& c) noexcept : pool_(&pool), connection_(&c) {}
        ~lease() { pool_->give_back(*connection_); }
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        pooled_connection* operator->() const noexcept { return connection_; }

    private:
        connection_pool* pool_;
        pooled_connection* connection_;
    };

    // An idle connection that is still usable, or a new one (waits while all
    // pool_size are lent). store_error when a new one cannot be opened.
    [[nodiscard]] lease acquire();

private:
    // Keeps the connection when it is usable and idle (outside any transaction); closes it otherwise.
    void give_back(pooled_connection& c) noexcept;
    // Removes `c` from the pool (the caller holds the lock) and hands it over for closing.
    std::unique_ptr<pooled_connection> take(pooled_connection& c) noexcept;

    const postgresql_store_options& options_;
    std::mutex mutex_;
    std::condition_variable returned_;
    std::vector<std::unique_ptr<pooled_connection>> all_;
    std::vector<pooled_connection*> idle_;
    std::size_t opening_ = 0;
};

}  // namespace idem::detail::pg
