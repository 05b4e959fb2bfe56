// Connections opened on demand, up to a size, and lent to one thread at a
// time: the store's own connections (SQLite, PostgreSQL, Redis) and the
// business sessions of idem::database. A connection that is no longer fit
// (broken, left inside a transaction) is closed instead of lent again, and the
// next caller opens a new one, so a pool recovers by itself after its server
// restarts; invalidate() makes every connection open so far suspect at once
// (a restart breaks them all, and an idle one finds out only at its next use).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "idem/error.hpp"

namespace idem::detail {

template <class Connection>
class lending_pool {
public:
    struct policy {
        std::function<std::unique_ptr<Connection>()> open;
        // An idle connection is lent only when this holds (it may have died meanwhile).
        std::function<bool(Connection&)> usable = [](Connection&) { return true; };
        // A connection given back is kept only when this holds.
        std::function<bool(Connection&)> reusable = [](Connection&) { return true; };
        // How long acquire() waits while all are lent, before store_error(timeout); zero waits for good.
        std::chrono::milliseconds acquire_timeout{0};
        // Opens the first connection at construction, so that bad settings fail there.
        bool open_first = true;
    };

    class lease {
    public:
        lease(lending_pool& pool, Connection& c) noexcept : pool_(&pool), connection_(&c) {}
        lease(lease&& other) noexcept
            : pool_(other.pool_), connection_(std::exchange(other.connection_, nullptr)), discard_(other.discard_) {}
        lease& operator=(lease&&) = delete;
        ~lease() {
            if (connection_ != nullptr) pool_->give_back(*connection_, discard_);
        }
        Connection* operator->() const noexcept { return connection_; }
        Connection& operator*() const noexcept { return *connection_; }
        // Closes the connection instead of returning it (its state is unknown).
        void discard() noexcept { discard_ = true; }

    private:
        lending_pool* pool_;
        Connection* connection_;
        bool discard_ = false;
    };

    lending_pool(std::size_t size, policy p) : size_(size), policy_(std::move(p)) {
        all_.reserve(size_);
        idle_.reserve(size_);  // giving a connection back never allocates
        if (policy_.open_first) {
            all_.push_back({policy_.open(), generation_});
            idle_.push_back(all_.back().connection.get());
        }
    }

    // An idle connection fit to lend, or a new one; waits while all `size` are lent
    // (store_error(timeout) past the policy's acquire_timeout). Whatever opening a
    // connection throws propagates.
    [[nodiscard]] lease acquire() {
        std::unique_lock lock(mutex_);
        const auto deadline = std::chrono::steady_clock::now() + policy_.acquire_timeout;
        const auto can_go = [&] { return !idle_.empty() || all_.size() + opening_ < size_; };
        for (;;) {
            if (policy_.acquire_timeout.count() <= 0)
                returned_.wait(lock, can_go);
            else if (!returned_.wait_until(lock, deadline, can_go))
                throw store_error(store_failure::timeout, "idem: no connection became free within " +
                                                              std::to_string(policy_.acquire_timeout.count()) +
                                                              " ms (all " + std::to_string(size_) +
                                                              " of the pool are in use)");
            if (idle_.empty()) break;
            Connection* c = idle_.back();
            idle_.pop_back();
            if (entry_of(*c).generation == generation_ && policy_.usable(*c)) return lease(*this, *c);
            std::unique_ptr<Connection> closing = take(*c);
            lock.unlock();  // closing may take a moment
            closing.reset();
            lock.lock();
        }
        // Open outside the lock: it may take round trips or wait on locks.
        ++opening_;
        const std::uint64_t generation = generation_;
        lock.unlock();
        std::unique_ptr<Connection> fresh;
        try {
            fresh = policy_.open();
        } catch (...) {
            lock.lock();
            --opening_;
            returned_.notify_one();
            throw;
        }
        lock.lock();
        --opening_;
        all_.push_back({std::move(fresh), generation});
        return lease(*this, *all_.back().connection);
    }

    // Every connection open now is closed before its next use, and one lent now when it comes back.
    void invalidate() noexcept {
        std::lock_guard lock(mutex_);
        ++generation_;
    }

private:
    struct entry {
        std::unique_ptr<Connection> connection;
        std::uint64_t generation;
    };

    void give_back(Connection& c, bool discard) noexcept {
        std::unique_ptr<Connection> closing;
        {
            std::lock_guard lock(mutex_);
            if (!discard && entry_of(c).generation == generation_ && policy_.reusable(c))
                idle_.push_back(&c);
            else
                closing = take(c);
        }
        returned_.notify_one();
    }

    entry& entry_of(Connection& c) noexcept {
        return *std::find_if(all_.begin(), all_.end(), [&](const entry& e) { return e.connection.get() == &c; });
    }

    // Removes `c` from the pool (the caller holds the lock) and hands it over for closing.
    std::unique_ptr<Connection> take(Connection& c) noexcept {
        const auto it =
            std::find_if(all_.begin(), all_.end(), [&](const entry& e) { return e.connection.get() == &c; });
        std::unique_ptr<Connection> taken = std::move(it->connection);
        all_.erase(it);
        return taken;
    }

    const std::size_t size_;
    const policy policy_;
    std::mutex mutex_;
    std::condition_variable returned_;
    std::vector<entry> all_;
    std::vector<Connection*> idle_;
    std::size_t opening_ = 0;
    std::uint64_t generation_ = 0;
};

}  // namespace idem::detail
