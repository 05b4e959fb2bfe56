#include "idem/sqlite_store.hpp"

#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "idem/purge.hpp"
#include "sql/migrations.hpp"
#include "sql/open_transactions.hpp"
#include "sql/sql_transaction.hpp"
#include "sqlite_admin.hpp"
#include "sqlite_pool.hpp"
#include "sqlite_records.hpp"

namespace idem {
namespace detail {
std::span<const embedded_migration> sqlite_migrations();  // generated from migrations/sqlite
}

namespace {

namespace sqlite = detail::sqlite;

// Rows purge_expired deletes per transaction: the write lock is held briefly.
constexpr std::size_t purge_batch_rows = 500;

sqlite_store_options checked(sqlite_store_options options) {
    std::vector<std::string> problems;
    if (options.path.empty()) problems.emplace_back("path is empty: the store needs a database file");
    if (options.path == ":memory:" || options.path.starts_with("file::memory:"))
        problems.emplace_back("path names memory: each connection would get its own; give a database file");
    if (options.pool_size == 0) problems.emplace_back("pool_size must be positive");
    if (!options.time) problems.emplace_back("time (the clock) is null");
    if (options.path.find('"') != std::string::npos)
        problems.emplace_back("path holds '\"', which SOCI's connection string cannot carry");
    if (options.connection.busy_timeout.count() < 0) problems.emplace_back("connection.busy_timeout is negative");
    if (options.connection.busy_timeout > std::chrono::floor<std::chrono::milliseconds>(max_duration))
        problems.emplace_back("connection.busy_timeout must be at most 100 years");
    if (options.connection.read_only && options.migrate_on_open)
        problems.emplace_back("a read-only store cannot migrate on open (set migrate_on_open = false)");
    if (!problems.empty()) throw options_error(std::move(problems));
    return options;
}

std::string file_of(sqlite::database* db) {
    const char* name = sqlite_api::sqlite3_db_filename(db, "main");
    return name == nullptr ? std::string() : std::string(name);
}

}  // namespace

struct IDEM_LOCAL sqlite_store::impl {
    explicit impl(sqlite_store_options o)
        : options(checked(std::move(o))), pool(sqlite::make_pool(options.path, options.connection, options.pool_size)) {
        file = file_of(sqlite::native_handle(pool->acquire()->session));
    }

    // Runs `work` on one of the store's connections in its own transaction, or,
    // when this thread holds a transaction on the store's file (and with it the
    // only write lock), inside that one behind a savepoint: a connection of its
    // own would wait for that very lock until the busy timeout.
    template <class Work>
    auto detached_tx(Work&& work) {
        if (unit_of_work* open = open_on_this_file()) return open->savepoint([&] { return work(*open); });
        auto c = pool->acquire();
        try {
            return c->runner->run(work);
        } catch (...) {
            // A rollback that failed may have left the connection inside a transaction.
            if (c->runner->last_state() == transaction_state::in_doubt) c.discard();
            throw;
        }
    }

    // As detached_tx, handing the work the record statements.
    template <class Work>
    auto detached(Work&& work) {
        return detached_tx([&](unit_of_work& tx) { return work(statements(tx)); });
    }

    [[nodiscard]] unit_of_work* open_on_this_file() const {
        const auto open = detail::open_transactions();
        for (auto it = open.rbegin(); it != open.rend(); ++it) {
            unit_of_work* tx = *it;
            if (&tx->internals().dialect() == &sqlite::dialect() && file_of(sqlite::native_handle(tx->sql())) == file)
                return tx;
        }
        return nullptr;
    }

    // The statements of the connection `tx` runs on, prepared on first use.
    sqlite::record_statements& statements(unit_of_work& tx) { return prepared<sqlite::record_statements>(tx, id); }
    sqlite::admin_statements& admin(unit_of_work& tx) { return prepared<sqlite::admin_statements>(tx, admin_id); }

    template <class Statements>
    Statements& prepared(unit_of_work& tx, std::uint64_t slot_owner) {
        sqlite::database* db = sqlite::native_handle(tx.sql());
        std::shared_ptr<void>& slot = tx.internals().connection_cache(slot_owner);
        auto* cached = static_cast<Statements*>(slot.get());
        if (cached != nullptr && cached->db() == db) return *cached;
        require_same_file(db);
        auto fresh = std::make_shared<Statements>(db);
        cached = fresh.get();
        slot = std::move(fresh);
        return *cached;
    }

    // A record written through another database than the store's would commit
    // with the wrong data; checked once per connection.
    void require_same_file(sqlite::database* db) const {
        std::error_code ec;
        const std::string other = file_of(db);
        if (other.empty() || !std::filesystem::equivalent(other, file, ec) || ec)
            throw std::invalid_argument("idem: the transaction's session is not on the store's database file");
    }

    [[nodiscard]] detail::record_times times(duration span) const {
        return detail::record_times_of(options.time->now(), span);
    }
    // When a key remembered for `remember` may be forgotten; none for zero.
    [[nodiscard]] std::optional<std::int64_t> forget_at(duration remember) const {
        if (remember <= duration::zero()) return std::nullopt;
        return times(remember).expires_at;
    }
    [[nodiscard]] std::int64_t now() const { return times(duration::zero()).now; }
    // Rows expired at least `older_than` ago have expires_at <= cutoff; rounded
    // so that a row younger than that never qualifies.
    [[nodiscard]] std::int64_t cutoff(duration older_than) const {
        if (older_than < duration::zero()) throw std::invalid_argument("idem: older_than must not be negative");
        return now() - std::chrono::ceil<std::chrono::milliseconds>(older_than).count();
    }

    sqlite_store_options options;
    std::unique_ptr<sqlite::connection_pool> pool;
    std::string file;
    const std::uint64_t id = detail::new_connection_cache_owner();
    const std::uint64_t admin_id = detail::new_connection_cache_owner();
};

sqlite_store::sqlite_store(sqlite_store_options options) : impl_(std::make_unique<impl>(std::move(options))) {
    if (impl_->options.migrate_on_open) (void)migrate();
}

sqlite_store::~sqlite_store() = default;

const std::string& sqlite_store::path() const noexcept {
    return impl_->options.path;
}

std::vector<std::string> sqlite_store::migrate() {
    auto c = impl_->pool->acquire();
    return detail::apply_migrations(
        *c->runner, detail::sqlite_migrations(), [](unit_of_work& tx, std::string_view sql) {
            sqlite::execute(sqlite::native_handle(tx.sql()), std::string(sql).c_str(), "applying a migration");
        });
}

reservation sqlite_store::do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    // A retry of finished or running work is answered by a plain read, without
    // taking the file's write lock; only an absent or expired entry needs one.
    if (impl_->open_on_this_file() == nullptr) {
        auto c = impl_->pool->acquire();
        if (!c->reader) c->reader = std::make_unique<sqlite::record_statements>(sqlite::native_handle(c->session));
        if (auto live = c->reader->peek(key, fingerprint, impl_->now())) return std::move(*live);
    }
    return impl_->detached([&](sqlite::record_statements& s) {
        return s.try_reserve(key, fingerprint, detail::new_token(), impl_->times(lease));
    });
}

bool sqlite_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                               std::string_view payload, duration retention, duration remember) {
    return impl_->detached([&](sqlite::record_statements& s) {
        return s.complete(key, token, fingerprint, payload, impl_->times(retention), impl_->forget_at(remember));
    });
}

bool sqlite_store::do_release(const record_key& key, std::string_view token) {
    return impl_->detached([&](sqlite::record_statements& s) { return s.release(key, token, impl_->now()); });
}

std::optional<record_state> sqlite_store::inspect(std::span<const std::byte> digest, bool with_payload) {
    const detail::record_id_type id = detail::record_id_of(digest);
    return impl_->detached_tx(
        [&](unit_of_work& tx) { return impl_->admin(tx).inspect(id, with_payload, impl_->now()); });
}

std::vector<listed_record> sqlite_store::recent(std::string_view name_space, std::size_t limit) {
    detail::check_recent_arguments(name_space, limit);
    return impl_->detached_tx(
        [&](unit_of_work& tx) { return impl_->admin(tx).recent(name_space, limit, impl_->now()); });
}

std::vector<listed_record> sqlite_store::completed_since(std::string_view name_space, const std::optional<scope>& owner,
                                                         time_point since, std::size_t limit) {
    detail::check_recent_arguments(name_space, limit);
    // Rows hold the millisecond a write began in, floored: so is `since`.
    const std::int64_t from = std::chrono::floor<std::chrono::milliseconds>(since.time_since_epoch()).count();
    std::optional<detail::scope_id_type> id;
    if (owner) id = detail::scope_id(*owner);
    return impl_->detached_tx(
        [&](unit_of_work& tx) { return impl_->admin(tx).completed_since(name_space, id, from, limit, impl_->now()); });
}

forget_result sqlite_store::forget(std::span<const std::byte> digest, bool force) {
    const detail::record_id_type id = detail::record_id_of(digest);
    return impl_->detached_tx([&](unit_of_work& tx) { return impl_->admin(tx).forget(id, force, impl_->now()); });
}

std::size_t sqlite_store::count_expired(duration older_than) {
    const std::int64_t cutoff = impl_->cutoff(older_than);
    return impl_->detached_tx([&](unit_of_work& tx) { return impl_->admin(tx).count_expired(cutoff); });
}

rewrite_progress sqlite_store::rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after,
                                                std::size_t limit, const payload_rewrite& rewrite) {
    if (limit == 0) throw std::invalid_argument("idem: a batch of payloads to rewrite must hold at least one");
    return impl_->detached_tx(
        [&](unit_of_work& tx) { return impl_->admin(tx).rewrite_payloads(after, limit, rewrite); });
}

std::size_t sqlite_store::purge_batch(std::size_t limit, duration older_than) {
    if (limit == 0) throw std::invalid_argument("idem: purge limit must be positive");
    const std::int64_t cutoff = impl_->cutoff(older_than);
    return impl_->detached([&](sqlite::record_statements& s) { return s.purge(cutoff, limit); });
}

// Several short batches rather than one long transaction: writers waiting for
// the lock get it between two of them.
std::size_t sqlite_store::do_purge_expired(std::size_t limit) {
    return purge(*this, {.batch = purge_batch_rows, .max_rows = limit}).deleted;
}

reservation sqlite_store::do_try_reserve_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                            duration lease) {
    return impl_->statements(tx).try_reserve(key, fingerprint, detail::new_token(), impl_->times(lease));
}

bool sqlite_store::do_complete_in(unit_of_work& tx, const record_key& key, std::string_view token,
                                  std::string_view fingerprint, std::string_view payload, duration retention,
                                  duration remember) {
    return impl_->statements(tx).complete(key, token, fingerprint, payload, impl_->times(retention),
                                          impl_->forget_at(remember));
}

record_lookup sqlite_store::do_look_up_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint) {
    return impl_->statements(tx).look_up(key, fingerprint, impl_->now());
}

void sqlite_store::do_insert_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                std::optional<std::string_view> payload, duration span, duration remember) {
    impl_->statements(tx).insert(key, fingerprint, detail::unheld_token, payload, impl_->times(span),
                                 impl_->forget_at(remember));
}

bool sqlite_store::do_release_in(unit_of_work& tx, const record_key& key, std::string_view token) {
    return impl_->statements(tx).release(key, token, impl_->now());
}

}  // namespace idem
