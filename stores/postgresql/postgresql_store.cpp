#include "idem/postgresql_store.hpp"

#include <stdexcept>

#include "idem/purge.hpp"
#include "postgresql_pool.hpp"
#include "sql/answer_watch.hpp"
#include "sql/migrations.hpp"
#include "sql/sql_transaction.hpp"

namespace idem {
namespace detail {
std::span<const embedded_migration> postgresql_migrations();  // generated from migrations/postgresql
}

namespace {

namespace pg = detail::pg;

// Rows purge_expired deletes per statement (each its own short transaction).
constexpr std::size_t purge_step = 1000;

postgresql_store_options checked(postgresql_store_options options) {
    std::vector<std::string> problems;
    if (options.connection.empty()) problems.emplace_back("connection is empty");
    if (options.pool_size == 0) problems.emplace_back("pool_size must be positive");
    if (options.lock_timeout.count() < 0) problems.emplace_back("lock_timeout is negative");
    if (options.statement_timeout.count() < 0) problems.emplace_back("statement_timeout is negative");
    if (options.answer_timeout.count() < 0) problems.emplace_back("answer_timeout is negative");
    if (!problems.empty()) throw options_error(std::move(problems));
    return options;
}

void check_older_than(duration older_than) {
    if (older_than < duration::zero()) throw std::invalid_argument("idem: older_than must not be negative");
}

}  // namespace

struct IDEM_LOCAL postgresql_store::impl {
    explicit impl(postgresql_store_options o) : options(checked(std::move(o))), pool(pg::make_pool(options)) {
        database = PQdb(pool->acquire()->statements->conn());
    }

    // Runs `work` on one of the store's connections; each statement is its own transaction.
    template <class Work>
    auto detached(Work&& work) {
        auto c = pool->acquire();
        const auto watched = detail::answer_watch::watch(PQsocket(c->statements->conn()), options.answer_timeout);
        return work(*c->statements);
    }

    // The statements of the connection `session` (the transaction's) has now, prepared on first use.
    pg::record_statements& statements(unit_of_work& tx, soci::session& session) {
        if (&tx.internals().dialect() != &pg::dialect())
            throw std::invalid_argument("idem: the transaction is not a PostgreSQL transaction");
        PGconn* conn = pg::native_handle(session);
        std::shared_ptr<void>& slot = tx.internals().connection_cache(id);
        auto* cached = static_cast<pg::record_statements*>(slot.get());
        if (cached != nullptr && cached->serves(conn)) return *cached;
        require_same_database(conn);
        auto fresh = std::make_shared<pg::record_statements>(conn, !options.transaction_pooler);
        cached = fresh.get();
        slot = std::move(fresh);
        return *cached;
    }

    // A record written through another database than the store's would commit
    // with the wrong data, out of the detached view's sight; checked once per connection.
    void require_same_database(const PGconn* conn) const {
        const char* name = PQdb(conn);
        if (name == nullptr || database != name)
            throw std::invalid_argument("idem: the transaction's session is not on the store's database");
    }

    postgresql_store_options options;
    std::unique_ptr<pg::connection_pool> pool;
    std::string database;
    const std::uint64_t id = detail::new_connection_cache_owner();
};

postgresql_store::postgresql_store(postgresql_store_options options)
    : impl_(std::make_unique<impl>(std::move(options))) {
    if (impl_->options.migrate_on_open) (void)migrate();
}

postgresql_store::~postgresql_store() = default;

std::vector<std::string> postgresql_store::migrate() {
    auto c = impl_->pool->acquire();
    // READ COMMITTED: after the advisory lock, the versions read must include
    // what a migration that held the lock before committed.
    transaction_runner runner(c->session, {.isolation = isolation_level::read_committed});
    return detail::apply_migrations(
        runner, detail::postgresql_migrations(), [](unit_of_work& tx, std::string_view sql) {
            // Several statements in one script: the simple protocol runs them all.
            (void)pg::execute(pg::native_handle(tx.sql()), std::string(sql).c_str(), "applying a migration");
        });
}

std::optional<record_state> postgresql_store::inspect(std::span<const std::byte> digest, bool with_payload) {
    const detail::record_id_type id = detail::record_id_of(digest);
    return impl_->detached([&](pg::record_statements& s) { return s.inspect(id, with_payload); });
}

std::vector<listed_record> postgresql_store::recent(std::string_view name_space, std::size_t limit) {
    detail::check_recent_arguments(name_space, limit);
    return impl_->detached([&](pg::record_statements& s) { return s.recent(name_space, limit); });
}

std::vector<listed_record> postgresql_store::completed_since(std::string_view name_space,
                                                             const std::optional<scope>& owner, time_point since,
                                                             std::size_t limit) {
    detail::check_recent_arguments(name_space, limit);
    std::optional<detail::scope_id_type> id;
    if (owner) id = detail::scope_id(*owner);
    return impl_->detached([&](pg::record_statements& s) { return s.completed_since(name_space, id, since, limit); });
}

forget_result postgresql_store::forget(std::span<const std::byte> digest, bool force) {
    const detail::record_id_type id = detail::record_id_of(digest);
    return impl_->detached([&](pg::record_statements& s) { return s.forget(id, force); });
}

std::size_t postgresql_store::count_expired(duration older_than) {
    check_older_than(older_than);
    return impl_->detached([&](pg::record_statements& s) { return s.count_expired(older_than); });
}

std::size_t postgresql_store::purge_batch(std::size_t limit, duration older_than) {
    if (limit == 0) throw std::invalid_argument("idem: purge limit must be positive");
    check_older_than(older_than);
    return impl_->detached([&](pg::record_statements& s) { return s.purge(limit, older_than); });
}

rewrite_progress postgresql_store::rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after,
                                                    std::size_t limit, const payload_rewrite& rewrite) {
    if (limit == 0) throw std::invalid_argument("idem: a batch of payloads to rewrite must hold at least one");
    return impl_->detached([&](pg::record_statements& s) { return s.rewrite_payloads(after, limit, rewrite); });
}

reservation postgresql_store::do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    return impl_->detached(
        [&](pg::record_statements& s) { return s.try_reserve(key, fingerprint, detail::new_token(), lease); });
}

bool postgresql_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                                   std::string_view payload, duration retention, duration remember) {
    return impl_->detached(
        [&](pg::record_statements& s) { return s.complete(key, token, fingerprint, payload, retention, remember); });
}

bool postgresql_store::do_release(const record_key& key, std::string_view token) {
    return impl_->detached([&](pg::record_statements& s) { return s.release(key, token); });
}

std::size_t postgresql_store::do_purge_expired(std::size_t limit) {
    return purge(*this, {.batch = purge_step, .max_rows = limit}).deleted;
}

reservation postgresql_store::do_try_reserve_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                                duration lease) {
    // In a runner's transaction a held-back BEGIN goes out with the reserve, in one round trip.
    detail::fast_path& fast = tx.internals();
    pg::record_statements& s = impl_->statements(tx, fast.store_session());
    return s.try_reserve_in(key, fingerprint, detail::new_token(), lease, &fast);
}

bool postgresql_store::do_complete_in(unit_of_work& tx, const record_key& key, std::string_view token,
                                      std::string_view fingerprint, std::string_view payload, duration retention,
                                      duration remember) {
    // The fast path: this transaction reserved the key (and holds its row
    // locked), the operation has returned, and COMMIT comes next; the completing
    // statement rides with it, and with what the work left to it (the messages
    // it published), and fails the commit if it completes nothing.
    detail::fast_path& fast = tx.internals();
    if (fast.may_defer()) {
        pg::record_statements& s = impl_->statements(tx, fast.deferring_session());
        if (s.reserved_in(fast.serial(), key, token)) {
            fast.defer(s.complete_at_commit(key, token, fingerprint, payload, retention, remember));
            return true;
        }
    }
    return impl_->statements(tx, tx.sql()).complete(key, token, fingerprint, payload, retention, remember);
}

record_lookup postgresql_store::do_look_up_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint) {
    // In a runner's transaction a held-back BEGIN goes out with the lookup, in one
    // round trip, or after it when it finds nothing (record_statements::look_up).
    detail::fast_path& fast = tx.internals();
    pg::record_statements& s = impl_->statements(tx, fast.store_session());
    return s.look_up(key, fingerprint, &fast);
}

void postgresql_store::do_insert_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                    std::optional<std::string_view> payload, duration span, duration remember) {
    // The record is the transaction's last statement: it rides with COMMIT, with
    // what the work left to it (the messages it published), and a failure (the
    // key taken meanwhile) keeps the COMMIT from happening.
    detail::fast_path& fast = tx.internals();
    if (fast.may_defer()) {
        fast.defer(impl_->statements(tx, fast.deferring_session())
                       .insert_at_commit(key, fingerprint, payload, span, remember));
        return;
    }
    impl_->statements(tx, tx.sql()).insert(key, fingerprint, payload, span, remember);
}

bool postgresql_store::do_release_in(unit_of_work& tx, const record_key& key, std::string_view token) {
    return impl_->statements(tx, tx.sql()).release(key, token);
}

}  // namespace idem
