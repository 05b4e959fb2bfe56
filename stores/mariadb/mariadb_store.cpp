#include "idem/mariadb_store.hpp"

#include <soci/session.h>

#include <stdexcept>

#include "idem/purge.hpp"
#include "idem/transaction_runner.hpp"
#include "internal/lending_pool.hpp"
#include "mariadb_native.hpp"
#include "mariadb_records.hpp"
#include "sql/migrations.hpp"
#include "sql/soci_errors.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/sql_transaction.hpp"

namespace idem {
namespace detail {
std::span<const embedded_migration> mariadb_migrations();  // generated from migrations/mariadb
}

namespace {

namespace mdb = detail::mariadb;

// Rows purge_expired deletes per transaction.
constexpr std::size_t purge_step = 1000;

mariadb_store_options checked(mariadb_store_options options) {
    std::vector<std::string> problems;
    if (options.connection.empty()) problems.emplace_back("connection is empty");
    if (options.pool_size == 0) problems.emplace_back("pool_size must be positive");
    if (options.lock_wait_timeout.count() < 1) problems.emplace_back("lock_wait_timeout must be at least 1 s");
    if (options.answer_timeout.count() < 0) problems.emplace_back("answer_timeout must not be negative");
    if (!options.time) problems.emplace_back("time (the clock) is null");
    if (!problems.empty()) throw options_error(std::move(problems));
    (void)mdb::soci_connection_string(options.connection);  // a malformed URL: std::invalid_argument
    return options;
}

// One of the store's own connections, with the runner its transactions run in.
struct pooled_connection {
    explicit pooled_connection(const mariadb_store_options& options) {
        open_mariadb_session(session, options.connection, options.lock_wait_timeout);
        runner = std::make_unique<transaction_runner>(session,
                                                      transaction_options{.answer_timeout = options.answer_timeout});
    }
    soci::session session;
    std::unique_ptr<transaction_runner> runner;  // declared after the session: dies first
};

// Runs `work` on `sql`, a driver's error as the store_error it is.
template <class Work>
auto translated(soci::session& sql, std::string_view what, Work&& work) {
    try {
        return work(sql);
    } catch (const soci::soci_error&) {
        detail::rethrow_soci_as_store_error(what, &sql);
    }
}

// A migration script: statements one by one (the mysql backend sends one at
// a time), its comment lines dropped.
void run_script(soci::session& sql, std::string_view script) {
    std::string text;
    for (std::size_t at = 0; at < script.size();) {
        const std::size_t end = std::min(script.find('\n', at), script.size());
        const std::string_view line = script.substr(at, end - at);
        if (!line.substr(line.find_first_not_of(" \t") == std::string_view::npos ? line.size()
                                                                                 : line.find_first_not_of(" \t"))
                 .starts_with("--"))
            text.append(line).push_back('\n');
        at = end + 1;
    }
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t end = std::min(text.find(';', start), text.size());
        const std::string statement = text.substr(start, end - start);
        if (statement.find_first_not_of(" \t\r\n") != std::string::npos) sql << statement;
        start = end + 1;
    }
}

}  // namespace

struct IDEM_LOCAL mariadb_store::impl {
    explicit impl(mariadb_store_options o)
        : options(checked(std::move(o))),
          pool(std::make_unique<detail::lending_pool<pooled_connection>>(
              options.pool_size, detail::lending_pool<pooled_connection>::policy{
                                     .open = [this] { return std::make_unique<pooled_connection>(options); },
                                     .usable = [](pooled_connection& c) { return c.session.is_connected(); },
                                 })) {
        database = database_of(pool->acquire()->session);
    }

    // Runs `work` on one of the store's connections in its own transaction.
    template <class Work>
    auto detached(std::string_view what, Work&& work) {
        auto c = pool->acquire();
        try {
            return c->runner->run([&](unit_of_work& tx) { return translated(tx.sql(), what, work); });
        } catch (...) {
            // A rollback that failed may have left the connection inside a transaction.
            if (c->runner->last_state() == transaction_state::in_doubt) c.discard();
            throw;
        }
    }

    // The session of the caller's transaction, checked once per connection to
    // be MariaDB's and on the store's database: a record written elsewhere
    // would commit with the wrong data, out of the detached view's sight.
    soci::session& session_of(unit_of_work& tx) {
        return session_of(tx, [&]() -> soci::session& { return tx.sql(); });
    }
    // The same, the session taken by `session` (fast_path: what it sends first):
    // the check reads no table, and may run before a held-back BEGIN.
    template <class Session>
    soci::session& session_of(unit_of_work& tx, Session&& session) {
        if (&tx.internals().dialect() != &mdb::dialect())
            throw std::invalid_argument("idem: the transaction is not a MariaDB transaction");
        std::shared_ptr<void>& checked_slot = tx.internals().connection_cache(id);
        soci::session& sql = session();
        if (!checked_slot) {
            if (database_of(sql) != database)
                throw std::invalid_argument("idem: the transaction's session is not on the store's database");
            checked_slot = std::make_shared<bool>(true);
        }
        return sql;
    }

    static std::string database_of(soci::session& session) {
        std::string name;
        soci::indicator none = soci::i_null;
        session << "SELECT DATABASE()", soci::into(name, none);
        return none == soci::i_ok ? name : std::string();
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
    // Rows expired at least `older_than` ago have expires_at <= cutoff.
    [[nodiscard]] std::int64_t cutoff(duration older_than) const {
        if (older_than < duration::zero()) throw std::invalid_argument("idem: older_than must not be negative");
        return now() - std::chrono::ceil<std::chrono::milliseconds>(older_than).count();
    }

    mariadb_store_options options;
    std::unique_ptr<detail::lending_pool<pooled_connection>> pool;
    std::string database;
    const std::uint64_t id = detail::new_connection_cache_owner();
};

mariadb_store::mariadb_store(mariadb_store_options options) : impl_(std::make_unique<impl>(std::move(options))) {
    if (impl_->options.migrate_on_open) (void)migrate();
}

mariadb_store::~mariadb_store() = default;

std::vector<std::string> mariadb_store::migrate() {
    auto c = impl_->pool->acquire();
    return detail::apply_migrations(
        *c->runner, detail::mariadb_migrations(), [](unit_of_work& tx, std::string_view sql) {
            translated(tx.sql(), "applying a migration", [&](soci::session& s) { run_script(s, sql); });
        });
}

std::optional<record_state> mariadb_store::inspect(std::span<const std::byte> digest, bool with_payload) {
    const detail::record_id_type id = detail::record_id_of(digest);
    return impl_->detached("inspecting a record",
                           [&](soci::session& sql) { return mdb::inspect(sql, id, with_payload, impl_->now()); });
}

std::vector<listed_record> mariadb_store::recent(std::string_view name_space, std::size_t limit) {
    detail::check_recent_arguments(name_space, limit);
    return impl_->detached("listing recent records",
                           [&](soci::session& sql) { return mdb::recent(sql, name_space, limit, impl_->now()); });
}

std::vector<listed_record> mariadb_store::completed_since(std::string_view name_space,
                                                          const std::optional<scope>& owner, time_point since,
                                                          std::size_t limit) {
    detail::check_recent_arguments(name_space, limit);
    // Rows hold the millisecond a write began in, floored: so is `since`.
    const std::int64_t from = std::chrono::floor<std::chrono::milliseconds>(since.time_since_epoch()).count();
    std::optional<detail::scope_id_type> id;
    if (owner) id = detail::scope_id(*owner);
    return impl_->detached("listing records completed since a time", [&](soci::session& sql) {
        return mdb::completed_since(sql, name_space, id, from, limit, impl_->now());
    });
}

forget_result mariadb_store::forget(std::span<const std::byte> digest, bool force) {
    const detail::record_id_type id = detail::record_id_of(digest);
    return impl_->detached("forgetting a record",
                           [&](soci::session& sql) { return mdb::forget(sql, id, force, impl_->now()); });
}

std::size_t mariadb_store::count_expired(duration older_than) {
    const std::int64_t cutoff = impl_->cutoff(older_than);
    return impl_->detached("counting expired records",
                           [&](soci::session& sql) { return mdb::count_expired(sql, cutoff); });
}

std::size_t mariadb_store::purge_batch(std::size_t limit, duration older_than) {
    if (limit == 0) throw std::invalid_argument("idem: purge limit must be positive");
    const std::int64_t cutoff = impl_->cutoff(older_than);
    return impl_->detached("purging expired records",
                           [&](soci::session& sql) { return mdb::purge(sql, cutoff, limit); });
}

rewrite_progress mariadb_store::rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after,
                                                 std::size_t limit, const payload_rewrite& rewrite) {
    if (limit == 0) throw std::invalid_argument("idem: a batch of payloads to rewrite must hold at least one");
    return impl_->detached("rewriting stored payloads",
                           [&](soci::session& sql) { return mdb::rewrite_payloads(sql, after, limit, rewrite); });
}

reservation mariadb_store::do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    return impl_->detached("reserving a record", [&](soci::session& sql) {
        return mdb::try_reserve(sql, key, fingerprint, detail::new_token(), impl_->times(lease));
    });
}

bool mariadb_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                                std::string_view payload, duration retention, duration remember) {
    return impl_->detached("completing a record", [&](soci::session& sql) {
        return mdb::complete(sql, key, token, fingerprint, payload, impl_->times(retention),
                             impl_->forget_at(remember));
    });
}

bool mariadb_store::do_release(const record_key& key, std::string_view token) {
    return impl_->detached("releasing a record",
                           [&](soci::session& sql) { return mdb::release(sql, key, token, impl_->now()); });
}

std::size_t mariadb_store::do_purge_expired(std::size_t limit) {
    return purge(*this, {.batch = purge_step, .max_rows = limit}).deleted;
}

reservation mariadb_store::do_try_reserve_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                             duration lease) {
    return translated(impl_->session_of(tx), "reserving a record", [&](soci::session& sql) {
        return mdb::try_reserve(sql, key, fingerprint, detail::new_token(), impl_->times(lease));
    });
}

bool mariadb_store::do_complete_in(unit_of_work& tx, const record_key& key, std::string_view token,
                                   std::string_view fingerprint, std::string_view payload, duration retention,
                                   duration remember) {
    return translated(impl_->session_of(tx), "completing a record", [&](soci::session& sql) {
        return mdb::complete(sql, key, token, fingerprint, payload, impl_->times(retention),
                             impl_->forget_at(remember));
    });
}

record_lookup mariadb_store::do_look_up_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint) {
    // In db.once a held-back START TRANSACTION goes out ahead of the lookup: one round trip for both.
    detail::fast_path& fast = tx.internals();
    soci::session& sql = impl_->session_of(tx, [&]() -> soci::session& { return fast.store_session(); });
    const char* begin = fast.held_begin();
    if (begin != nullptr) fast.begin_sent();  // before it runs: a lookup that fails after it is still rolled back
    return translated(sql, "reading a record",
                      [&](soci::session& s) { return mdb::look_up(s, key, fingerprint, impl_->now(), begin); });
}

void mariadb_store::do_insert_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                 std::optional<std::string_view> payload, duration span, duration remember) {
    // The record is the transaction's last statement: in db.once it goes out with
    // COMMIT, in one compound statement, and a duplicate (the key taken
    // meanwhile) ends it before the COMMIT.
    detail::fast_path& fast = tx.internals();
    if (fast.may_defer() && (!payload || payload->size() < mdb::deferred_payload_limit)) {
        soci::session& sql = impl_->session_of(tx, [&]() -> soci::session& { return fast.deferring_session(); });
        fast.defer(translated(sql, "inserting a record", [&](soci::session&) {
            return mdb::insert_at_commit(key, fingerprint, detail::unheld_token, payload, impl_->times(span),
                                         impl_->forget_at(remember));
        }));
        return;
    }
    translated(impl_->session_of(tx), "inserting a record", [&](soci::session& sql) {
        mdb::insert(sql, key, fingerprint, detail::unheld_token, payload, impl_->times(span),
                    impl_->forget_at(remember));
    });
}

bool mariadb_store::do_release_in(unit_of_work& tx, const record_key& key, std::string_view token) {
    return translated(impl_->session_of(tx), "releasing a record",
                      [&](soci::session& sql) { return mdb::release(sql, key, token, impl_->now()); });
}

}  // namespace idem
