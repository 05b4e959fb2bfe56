#include "database.hpp"

#include <idem/sqlite_store.hpp>
#ifdef IDEM_PAYMENTS_POSTGRESQL
#include <idem/postgresql_store.hpp>
#endif

#include <stdexcept>

namespace payments {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Portable between SQLite and PostgreSQL: amounts are integer cents.
constexpr const char* schema[] = {
    "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL CHECK (balance >= 0))",
    "CREATE TABLE IF NOT EXISTS transfers (id TEXT PRIMARY KEY, from_account TEXT NOT NULL, "
    "to_account TEXT NOT NULL, amount BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS deposits (event_id TEXT PRIMARY KEY, account TEXT NOT NULL, amount BIGINT NOT NULL)",
};

}  // namespace

database database::open(const std::string& url, std::size_t connections) {
    database db;
    std::function<void(soci::session&)> open_session;
    if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
#ifdef IDEM_PAYMENTS_POSTGRESQL
        db.postgresql_ = true;
        db.store_ = std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = url});
        open_session = [url](soci::session& s) { idem::open_postgresql_session(s, url); };
#else
        throw std::invalid_argument("this build has no PostgreSQL store");
#endif
    } else {
        const std::string path = url.starts_with("sqlite:") ? url.substr(7) : url;
        if (!url.starts_with("sqlite:") && !ends_with(path, ".db") && !ends_with(path, ".sqlite"))
            throw std::invalid_argument("--db takes sqlite:PATH, a path ending in .db, or postgresql://...");
        db.store_ = std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{.path = path});
        open_session = [path](soci::session& s) { idem::open_sqlite_session(s, path); };
    }
    for (std::size_t i = 0; i < connections; ++i) {
        auto c = std::make_unique<connection>();
        open_session(c->session);
        c->runner = std::make_unique<idem::transaction_runner>(
            c->session, idem::transaction_options{.isolation = idem::isolation_level::read_committed});
        db.idle_.push_back(c.get());
        db.connections_.push_back(std::move(c));
    }
    db.connections_.front()->runner->run([](idem::transaction& tx) {
        for (const char* statement : schema) tx.session() << statement;
    });
    return db;
}

connection& database::acquire() {
    std::unique_lock lock(*mutex_);
    available_->wait(lock, [&] { return !idle_.empty(); });
    connection* c = idle_.back();
    idle_.pop_back();
    return *c;
}

void database::give_back(connection& c) {
    {
        std::lock_guard lock(*mutex_);
        idle_.push_back(&c);
    }
    available_->notify_one();
}

}  // namespace payments
