// The store's own connections to its database file, each with its runner
// (and so its prepared statements), lent to one thread at a time.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <soci/session.h>

#include "idem/sqlite_store.hpp"
#include "idem/transaction_runner.hpp"
#include "sqlite_records.hpp"

namespace idem::detail::sqlite {

struct pooled_connection {
    pooled_connection(const std::string& path, const sqlite_connection_options& options);

    soci::session session;
    std::unique_ptr<transaction_runner> runner;  // declared after the session: dies first
    // Statements run outside any transaction (autocommit reads); prepared on first use.
    std::unique_ptr<record_statements> reader;
};

class connection_pool {
public:
    // Opens the first connection now, so a bad path fails at construction.
    connection_pool(std::string path, sqlite_connection_options options, std::size_t size);

    class lease {
    public:
        lease(connection_pool& pool, pooled_connection& c) noexcept : pool_(&pool), connection_(&c) {}
        ~lease() { pool_->give_back(*connection_, discard_); }
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        pooled_connection* operator->() const noexcept { return connection_; }
        // Closes the connection instead of returning it (its state is unknown).
        void discard() noexcept { discard_ = true; }

    private:
        connection_pool* pool_;
        pooled_connection* connection_;
        bool discard_ = false;
    };

    [[nodiscard]] lease acquire();

private:
    void give_back(pooled_connection& c, bool discard) noexcept;

    std::string path_;
    sqlite_connection_options options_;
    std::size_t size_;
    std::mutex mutex_;
    std::condition_variable returned_;
    std::vector<std::unique_ptr<pooled_connection>> all_;
    std::vector<pooled_connection*> idle_;
    std::size_t opening_ = 0;
};

}  // namespace idem::detail::sqlite
