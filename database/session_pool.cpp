#include "session_pool.hpp"

#include <string>

#include "idem/error.hpp"

namespace idem::detail {

session_pool::session_pool(opener open, std::size_t size, std::chrono::milliseconds acquire_timeout,
                           transaction_options options)
    : open_(std::move(open)), size_(size), acquire_timeout_(acquire_timeout), options_(options) {
    slots_.reserve(size_);
    idle_.reserve(size_);
}

session_pool::lease session_pool::borrow() {
    std::unique_lock lock(mutex_);
    const bool freed =
        available_.wait_for(lock, acquire_timeout_, [&] { return !idle_.empty() || slots_.size() < size_; });
    if (!freed)
        throw store_error(store_failure::timeout, "idem: no database session became free within " +
                                                      std::to_string(acquire_timeout_.count()) + " ms (pool_size " +
                                                      std::to_string(size_) + ")");
    if (idle_.empty()) {
        slots_.push_back(std::make_unique<slot>());  // opened by its first ready()
        return lease(*this, *slots_.back());
    }
    slot* s = idle_.back();
    idle_.pop_back();
    return lease(*this, *s);
}

void session_pool::connection_lost() noexcept {
    std::lock_guard lock(mutex_);
    ++generation_;
}

transaction_runner& session_pool::ready(slot& s) {
    std::uint64_t current = 0;
    {
        std::lock_guard lock(mutex_);
        current = generation_;
    }
    if (s.runner && s.generation == current) return *s.runner;
    // The runner holds prepared statements of the old connection: end it first.
    s.runner.reset();
    if (s.sql.get_backend() != nullptr) s.sql.close();
    open_(s.sql);
    s.runner = std::make_unique<transaction_runner>(s.sql, options_);
    s.generation = current;
    return *s.runner;
}

void session_pool::give_back(slot& s) noexcept {
    {
        std::lock_guard lock(mutex_);
        idle_.push_back(&s);
    }
    available_.notify_one();
}

}  // namespace idem::detail
