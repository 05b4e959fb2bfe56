#include "postgresql_pool.hpp"

#include <algorithm>

namespace idem::detail::pg {
namespace {

// The store's statements run in their own short transactions, so they can
// insist on READ COMMITTED whatever the database's default; text comes back as UTF-8.
std::string session_settings(const postgresql_store_options& options) {
    std::string sql = "SET default_transaction_isolation = 'read committed'; SET client_encoding = 'UTF8';"
                      " SET client_min_messages = warning";
    if (options.lock_timeout.count() > 0) sql += "; SET lock_timeout = " + std::to_string(options.lock_timeout.count());
    if (options.statement_timeout.count() > 0)
        sql += "; SET statement_timeout = " + std::to_string(options.statement_timeout.count());
    return sql;
}

bool reusable(PGconn* conn) noexcept {
    return !broken(conn) && PQtransactionStatus(conn) == PQTRANS_IDLE && PQpipelineStatus(conn) == PQ_PIPELINE_OFF;
}

}  // namespace

pooled_connection::pooled_connection(const postgresql_store_options& options) {
    open_postgresql_session(session, options.connection);
    PGconn* conn = native_handle(session);
    silence_notices(conn);
    (void)execute(conn, session_settings(options).c_str(), "configuring a connection");
    statements = std::make_shared<record_statements>(conn);
}

connection_pool::connection_pool(const postgresql_store_options& options) : options_(options) {
    all_.push_back(std::make_unique<pooled_connection>(options_));
    idle_.push_back(all_.back().get());
}

connection_pool::lease connection_pool::acquire() {
    std::unique_lock lock(mutex_);
    for (;;) {
        returned_.wait(lock, [&] { return !idle_.empty() || all_.size() + opening_ < options_.pool_size; });
        if (idle_.empty()) break;
        pooled_connection* c = idle_.back();
        idle_.pop_back();
        // A server that restarted has closed its end while the connection sat
        // here: find out now, without a round trip, rather than fail a caller.
        if (still_usable(c->statements->conn())) return lease(*this, *c);
        std::unique_ptr<pooled_connection> closing = take(*c);
        lock.unlock();  // closing may take a moment
        closing.reset();
        lock.lock();
    }
    // Open outside the lock: connecting takes round trips.
    ++opening_;
    lock.unlock();
    std::unique_ptr<pooled_connection> fresh;
    try {
        fresh = std::make_unique<pooled_connection>(options_);
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

std::unique_ptr<pooled_connection> connection_pool::take(pooled_connection& c) noexcept {
    const auto it = std::find_if(all_.begin(), all_.end(), [&](const auto& p) { return p.get() == &c; });
    std::unique_ptr<pooled_connection> taken = std::move(*it);
    all_.erase(it);
    return taken;
}

void connection_pool::give_back(pooled_connection& c) noexcept {
    std::unique_ptr<pooled_connection> closing;
    {
        std::lock_guard lock(mutex_);
        if (reusable(c.statements->conn())) {
            idle_.push_back(&c);
        } else {
            closing = take(c);
        }
    }
    returned_.notify_one();
}

}  // namespace idem::detail::pg
