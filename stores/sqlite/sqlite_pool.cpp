#include "sqlite_pool.hpp"

#include <algorithm>

namespace idem::detail::sqlite {

pooled_connection::pooled_connection(const std::string& path, const sqlite_connection_options& options) {
    open_sqlite_session(session, path, options);
    runner = std::make_unique<transaction_runner>(session);
}

connection_pool::connection_pool(std::string path, sqlite_connection_options options, std::size_t size)
    : path_(std::move(path)), options_(options), size_(size) {
    all_.push_back(std::make_unique<pooled_connection>(path_, options_));
    idle_.push_back(all_.back().get());
}

connection_pool::lease connection_pool::acquire() {
    std::unique_lock lock(mutex_);
    returned_.wait(lock, [&] { return !idle_.empty() || all_.size() + opening_ < size_; });
    if (!idle_.empty()) {
        pooled_connection* c = idle_.back();
        idle_.pop_back();
        return lease(*this, *c);
    }
    // Open outside the lock: it may wait on the file's locks.
    ++opening_;
    lock.unlock();
    std::unique_ptr<pooled_connection> fresh;
    try {
        fresh = std::make_unique<pooled_connection>(path_, options_);
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

void connection_pool::give_back(pooled_connection& c, bool discard) noexcept {
    std::unique_ptr<pooled_connection> closing;
    {
        std::lock_guard lock(mutex_);
        if (discard) {
            const auto it = std::find_if(all_.begin(), all_.end(), [&](const auto& p) { return p.get() == &c; });
            closing = std::move(*it);
            all_.erase(it);
        } else {
            idle_.push_back(&c);
        }
    }
    returned_.notify_one();
}

}  // namespace idem::detail::sqlite
