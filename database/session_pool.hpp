// The business sessions of an idem::database: SOCI sessions, each with its
// transaction runner, opened as needed up to a size, lent one caller at a time.
//
// A lost connection makes every session of the pool suspect (a server restart
// breaks them all, and an idle one only finds out at its next statement), so
// connection_lost() marks them all: each is opened anew before its next use.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <soci/session.h>

#include "idem/transaction_runner.hpp"

namespace idem::detail {

class session_pool {
public:
    using opener = std::function<void(soci::session&)>;

    struct slot {
        soci::session sql;
        std::unique_ptr<transaction_runner> runner;  // null until opened
        std::uint64_t generation = 0;
    };

    // A borrowed slot, given back when it goes out of scope.
    class lease {
    public:
        lease(session_pool& pool, slot& s) noexcept : pool_(&pool), slot_(&s) {}
        lease(lease&& other) noexcept : pool_(other.pool_), slot_(std::exchange(other.slot_, nullptr)) {}
        lease& operator=(lease&&) = delete;
        ~lease() {
            if (slot_ != nullptr) pool_->give_back(*slot_);
        }
        // The runner of an open, current session: opens (or reopens) it first.
        // store_error when the database cannot be reached.
        transaction_runner& runner() { return pool_->ready(*slot_); }
        // Its session is opened anew before its next use (its last transaction's end is unknown).
        void discard() noexcept { slot_->generation = 0; }

    private:
        session_pool* pool_;
        slot* slot_;
    };

    session_pool(opener open, std::size_t size, std::chrono::milliseconds acquire_timeout, transaction_options options);

    // Waits for a free slot; store_error(timeout) when none frees within the acquire timeout.
    [[nodiscard]] lease borrow();
    // Every session opened so far is reopened before its next use.
    void connection_lost() noexcept;

private:
    transaction_runner& ready(slot& s);
    void give_back(slot& s) noexcept;

    opener open_;
    std::size_t size_;
    std::chrono::milliseconds acquire_timeout_;
    transaction_options options_;
    std::mutex mutex_;
    std::condition_variable available_;
    std::vector<std::unique_ptr<slot>> slots_;
    std::vector<slot*> idle_;
    std::uint64_t generation_ = 1;
};

}  // namespace idem::detail
