#include "idem/database.hpp"

#include <soci/soci.h>

#include "idem/store_registry.hpp"
#include "internal/retry_schedule.hpp"
#include "session_pool.hpp"
#include "sql/soci_errors.hpp"

namespace idem {
namespace {

std::vector<std::string> problems_of(const database_options& o) {
    std::vector<std::string> problems;
    if (o.pool_size < 1 || o.pool_size > 1024) problems.emplace_back("pool_size must be between 1 and 1024");
    if (o.acquire_timeout <= std::chrono::milliseconds(0) || o.acquire_timeout > std::chrono::hours(1))
        problems.emplace_back("acquire_timeout must be above 0 and at most 1h");
    if (o.attempts < 1 || o.attempts > 100) problems.emplace_back("attempts must be between 1 and 100");
    if (o.backoff < std::chrono::milliseconds(0) || o.backoff > std::chrono::minutes(1))
        problems.emplace_back("backoff must be between 0 and 1m");
    if (o.max_message_bytes < 1 || o.max_message_bytes > 64 * 1024 * 1024)
        problems.emplace_back("max_message_bytes must be between 1 and 64 MiB");
    return problems;
}

}  // namespace

struct IDEM_LOCAL database::impl {
    database_url url;
    database_options options;
    std::shared_ptr<transactional_record_store> store;
    store_admin* admin;
    idem::executor exec;
    std::function<void(soci::session&)> open_session;
    // PostgreSQL stores need READ COMMITTED; SQLite transactions are always serializable.
    transaction_options session_options{.isolation = isolation_level::read_committed,
                                        .transaction_pooler = options.transaction_pooler,
                                        .telemetry = options.telemetry,
                                        .max_message_bytes = options.max_message_bytes};
    std::unique_ptr<detail::session_pool> pool;

    impl(database_url u, database_options o, opened_store s)
        : url(std::move(u)),
          options(std::move(o)),
          store(std::move(s.store)),
          admin(s.admin),
          exec(options.options ? idem::executor(executor::store_map{{"", store}}, options.options, options.telemetry)
                               : idem::executor(store, options.executor, options.telemetry)),
          open_session(std::move(s.open_session)),
          pool(detail::make_session_pool(options.pool_size, options.acquire_timeout)) {}
};

namespace {

// The units of work running on this thread, innermost last: a nested call joins its database's.
thread_local std::vector<std::pair<const void*, transaction_runner*>> running_units;

struct running_unit {
    running_unit(const void* db, transaction_runner& runner) { running_units.emplace_back(db, &runner); }
    ~running_unit() { running_units.pop_back(); }
    running_unit(const running_unit&) = delete;
    running_unit& operator=(const running_unit&) = delete;
};

transaction_runner* joined_unit(const void* db) noexcept {
    for (auto it = running_units.rbegin(); it != running_units.rend(); ++it)
        if (it->first == db) return it->second;
    return nullptr;
}

// SOCI's exceptions as idem::store_error (SOCI's text quotes the statement and
// its values: it stays nested, for logs, never in what()).
std::exception_ptr translated(std::exception_ptr failure, soci::session* session) {
    try {
        std::rethrow_exception(failure);
    } catch (const soci::soci_error&) {
        try {
            try {
                detail::rethrow_soci_as_store_error("a statement of the unit of work", session);
            } catch (const store_error& e) {
                std::throw_with_nested(e);
            }
        } catch (...) {
            return std::current_exception();
        }
    } catch (...) {
    }
    return failure;
}

}  // namespace

database database::open(std::string_view url, database_options options) {
    database_url parsed = database_url::parse(url);
    if (auto problems = problems_of(options); !problems.empty()) throw options_error(std::move(problems));
    opened_store store =
        open_store(parsed, {.sqlite = options.sqlite, .transaction_pooler = options.transaction_pooler});
    return database(std::make_unique<impl>(std::move(parsed), std::move(options), std::move(store)));
}

database::database(std::unique_ptr<impl> state) noexcept : impl_(std::move(state)) {}
database::database(database&&) noexcept = default;
database& database::operator=(database&&) noexcept = default;
database::~database() = default;

std::vector<std::string> database::migrate() {
    return impl_->admin->migrate();
}

idem::executor& database::executor() noexcept {
    return impl_->exec;
}
transactional_record_store& database::store() noexcept {
    return *impl_->store;
}
std::shared_ptr<transactional_record_store> database::shared_store() const noexcept {
    return impl_->store;
}
store_admin& database::admin() noexcept {
    return *impl_->admin;
}
std::string_view database::engine() const noexcept {
    return impl_->url.scheme;
}

soci::session& database::session_of(transaction_runner& runner) noexcept {
    return runner.session();
}

borrowed_session database::borrow(soci::session& session) {
    return borrowed_session(*this, session);
}

borrowed_session::borrowed_session(database& db, soci::session& session)
    : db_(&db), runner_(std::make_unique<transaction_runner>(session, db.impl_->session_options)) {}
borrowed_session::borrowed_session(borrowed_session&&) noexcept = default;
borrowed_session& borrowed_session::operator=(borrowed_session&&) noexcept = default;
borrowed_session::~borrowed_session() = default;

void database::run_unit(transaction_runner* on,
                        detail::function_ref<void(transaction_runner&, detail::unit_run&)> body) {
    impl& d = *impl_;
    if (transaction_runner* joined = on != nullptr ? (on->in_transaction() ? on : nullptr) : joined_unit(&d)) {
        detail::unit_run run;
        body(*joined, run);
        return;
    }
    // Reruns after a transient conflict; the waits double up to 1024 times the first.
    detail::retrying reruns(
        {.attempts = d.options.attempts, .first = d.options.backoff, .ceiling = d.options.backoff * 1024});
    for (;;) {
        detail::unit_run run;
        std::optional<detail::session_pool::lease> lease;
        if (on == nullptr) lease.emplace(d.pool->acquire());
        transaction_runner* runner = on;
        try {
            if (lease) runner = &detail::ready(**lease, d.open_session, d.session_options);
            const running_unit registered(&d, *runner);
            body(*runner, run);
            return;
        } catch (...) {
            const std::exception_ptr failure =
                translated(std::current_exception(), runner != nullptr ? &runner->session() : nullptr);
            const bool in_doubt = runner != nullptr && runner->last_state() == transaction_state::in_doubt;
            // A transaction whose end is unknown may still be open on its connection: never lend it again.
            if (in_doubt && lease) lease->discard();
            // It committed, and what failed came after (an after_commit hook): nothing
            // rolled back, and running the unit of work again would do it twice.
            if (run.committing && runner != nullptr && runner->last_state() == transaction_state::committed)
                std::rethrow_exception(failure);
            try {
                std::rethrow_exception(failure);
            } catch (transaction_in_doubt&) {
                throw;
            } catch (error& e) {
                if (e.is_connection_lost() && lease) d.pool->invalidate();
                if (in_doubt && run.committing)
                    std::throw_with_nested(transaction_in_doubt(
                        "idem: the answer to COMMIT was lost: the unit of work may or may not have committed"));
                detail::error_access::mark_rolled_back(e);
                // A borrowed session is the application's to reopen: a lost connection stays lost.
                const bool retry = e.is_transient() && (lease || !e.is_connection_lost());
                if (!retry || !reruns.wait()) throw;
            }
            // Other exceptions (the work's own) propagated above, after the rollback.
        }
    }
}

}  // namespace idem
