#include "connection_pool.hpp"

namespace idem::redis_detail {

connection_pool::lease connection_pool::acquire() {
    std::unique_lock lock(mutex_);
    const bool bounded = options_.connect_timeout.count() > 0 && options_.command_timeout.count() > 0;
    const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout + options_.command_timeout;
    for (;;) {
        if (!idle_.empty()) {
            auto c = std::move(idle_.back());
            idle_.pop_back();
            lock.unlock();
            if (c->idle_and_open()) return lease(*this, std::move(c));
            c.reset();  // closed while idle (a server restart): dropped before anything was sent
            lock.lock();
            --open_;
            continue;
        }
        if (open_ < options_.pool_size) {
            ++open_;
            lock.unlock();
            try {
                return lease(*this, connection::open(options_));
            } catch (...) {
                lock.lock();
                --open_;
                returned_.notify_one();
                throw;
            }
        }
        if (!bounded) {
            returned_.wait(lock);
        } else if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
                   open_ >= options_.pool_size) {
            throw store_error(store_failure::timeout, "all " + std::to_string(options_.pool_size) +
                                                          " connections stayed busy past the connect and command "
                                                          "timeouts");
        }
    }
}

void connection_pool::give_back(std::unique_ptr<connection> c) noexcept {
    const bool keep = c->healthy();
    if (!keep) c.reset();  // closed outside the lock
    {
        std::lock_guard lock(mutex_);
        if (keep)
            idle_.push_back(std::move(c));
        else
            --open_;
    }
    returned_.notify_one();
}

}  // namespace idem::redis_detail
