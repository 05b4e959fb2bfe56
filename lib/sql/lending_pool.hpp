// Connections a store opens on demand, up to a size, and lends to one thread at
// a time. A connection that is no longer fit (broken, left inside a
// transaction) is closed instead of lent again, and the next caller opens a new
// one, so a store recovers by itself after its server restarts.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

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
    };

    class lease {
    public:
        lease(lending_pool& pool, Connection& c) noexcept : pool_(&pool), connection_(&c) {}
        ~lease() { pool_->give_back(*connection_, discard_); }
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        Connection* operator->() const noexcept { return connection_; }
        Connection& operator*() const noexcept { return *connection_; }
        // Closes the connection instead of returning it (its state is unknown).
        void discard() noexcept { discard_ = true; }

    private:
        lending_pool* pool_;
        Connection* connection_;
        bool discard_ = false;
    };

    // Opens the first connection now, so that bad settings fail at construction.
    lending_pool(std::size_t size, policy p) : size_(size), policy_(std::move(p)) {
        all_.push_back(policy_.open());
        idle_.push_back(all_.back().get());
    }

    // An idle connection fit to lend, or a new one; waits while all `size` are lent.
    // Whatever opening a connection throws propagates.
    [[nodiscard]] lease acquire() {
        std::unique_lock lock(mutex_);
        for (;;) {
            returned_.wait(lock, [&] { return !idle_.empty() || all_.size() + opening_ < size_; });
            if (idle_.empty()) break;
            Connection* c = idle_.back();
            idle_.pop_back();
            if (policy_.usable(*c)) return lease(*this, *c);
            std::unique_ptr<Connection> closing = take(*c);
            lock.unlock();  // closing may take a moment
            closing.reset();
            lock.lock();
        }
        // Open outside the lock: it may take round trips or wait on locks.
        ++opening_;
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
        all_.push_back(std::move(fresh));
        return lease(*this, *all_.back());
    }

private:
    void give_back(Connection& c, bool discard) noexcept {
        std::unique_ptr<Connection> closing;
        {
            std::lock_guard lock(mutex_);
            if (!discard && policy_.reusable(c))
                idle_.push_back(&c);
            else
                closing = take(c);
        }
        returned_.notify_one();
    }

    // Removes `c` from the pool (the caller holds the lock) and hands it over for closing.
    std::unique_ptr<Connection> take(Connection& c) noexcept {
        const auto it = std::find_if(all_.begin(), all_.end(), [&](const auto& p) { return p.get() == &c; });
        std::unique_ptr<Connection> taken = std::move(*it);
        all_.erase(it);
        return taken;
    }

    const std::size_t size_;
    const policy policy_;
    std::mutex mutex_;
    std::condition_variable returned_;
    std::vector<std::unique_ptr<Connection>> all_;
    std::vector<Connection*> idle_;
    std::size_t opening_ = 0;
};

}  // namespace idem::detail
