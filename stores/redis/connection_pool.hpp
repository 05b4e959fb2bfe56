// The connections a redis_store shares between threads.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "connection.hpp"

namespace idem::redis_detail {

class connection_pool {
public:
    // idle_ never grows past pool_size, so giving a connection back cannot allocate.
    explicit connection_pool(redis_options options) : options_(std::move(options)) {
        idle_.reserve(options_.pool_size);
    }

    // A connection for one operation: back to the pool when done, dropped when broken.
    class lease {
    public:
        lease(connection_pool& pool, std::unique_ptr<connection> c) noexcept
            : pool_(&pool), connection_(std::move(c)) {}
        lease(lease&& other) noexcept : pool_(other.pool_), connection_(std::move(other.connection_)) {}
        lease& operator=(lease&&) = delete;
        ~lease() {
            if (connection_) pool_->give_back(std::move(connection_));
        }
        connection* operator->() const noexcept { return connection_.get(); }
        connection& operator*() const noexcept { return *connection_; }

    private:
        connection_pool* pool_;
        std::unique_ptr<connection> connection_;
    };

    // An idle connection still open, else a new one while fewer than pool_size are
    // open, else waits for one to come back. Throws store_error: connection_lost
    // when it cannot connect, timeout when every connection stays busy past
    // connect_timeout + command_timeout.
    [[nodiscard]] lease acquire();

private:
    friend class lease;
    void give_back(std::unique_ptr<connection> c) noexcept;

    const redis_options options_;
    std::mutex mutex_;
    std::condition_variable returned_;
    std::vector<std::unique_ptr<connection>> idle_;
    std::size_t open_ = 0;
};

}  // namespace idem::redis_detail
