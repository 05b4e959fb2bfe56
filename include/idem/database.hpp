// idem/database.hpp: one URL opens the record store and a pool of SOCI
// sessions on the same database; units of work run on them, at most once per key.
//
//   idem::database db = idem::database::open("sqlite:bank.db", {.pool_size = 8});
//   db.migrate();
//   idem::record_key key{"bank.transfer", idem::scope::tenant("acme"), request_key};
//   auto e = db.once(key, fingerprint, [&](idem::unit_of_work& uow) {
//       uow.sql() << "UPDATE accounts SET balance = balance - :a WHERE id = :id", soci::use(amount), soci::use(from);
//       return std::string("moved");
//   });
//   if (e.status() == idem::execution_status::replayed) ...  // ran before: the money moved once
//
// `once` reserves the key, runs the work and writes the completed record in ONE
// transaction (on PostgreSQL with no round trip beyond the work's statements).
// A unit of work that fails with a transient conflict (SQLITE_BUSY, a deadlock,
// a serialization failure, a connection lost before COMMIT was sent) is rolled
// back and run again as a whole, up to `attempts` times, with backoff; a COMMIT
// whose answer was lost is never run again: it throws transaction_in_doubt.
// Link idem_database (pkg-config idem-database, meson dependency('idem-database')).
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "idem/database_url.hpp"
#include "idem/execute_in_transaction.hpp"
#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/store_admin.hpp"
#include "idem/transaction.hpp"
#include "idem/transactional_record_store.hpp"

namespace soci {
class session;
}

namespace idem {

struct database_options {
    std::size_t pool_size = 4;  // business sessions, opened as needed
    // How long a call waits for a free session before store_error(timeout).
    std::chrono::milliseconds acquire_timeout{5000};
    // Runs of a unit of work that fails with a transient conflict, the first included.
    int attempts = 3;
    // The wait before the second run; doubled for each further run, with jitter.
    std::chrono::milliseconds backoff{10};
    // The executor behind once(): fixed options, or a source replaced at run time.
    executor_options executor = {};
    std::shared_ptr<options_source> options = nullptr;
    std::shared_ptr<telemetry_sink> telemetry = nullptr;
    // SQLite: busy timeout and synchronous mode of every connection (store's and pool's).
    sqlite_connection_options sqlite = {};
    // PostgreSQL: every business session waits for a lock at most the store's
    // lock_timeout (5 s), then the unit of work fails with store_error(timeout).
    // Behind a pooler in transaction mode (PgBouncer pool_mode=transaction) no
    // session parameter is set: see postgresql_store_options::transaction_pooler.
    bool transaction_pooler = false;
};

// The transaction a unit of work runs in: SOCI's session for the SQL, savepoints.
class unit_of_work {
public:
    explicit unit_of_work(transaction& tx) noexcept : tx_(tx) {}

    // The session of this transaction: write business SQL here, as with SOCI.
    [[nodiscard]] soci::session& sql() { return tx_.session(); }
    // Runs work() behind a savepoint: a throw undoes only what work() wrote, and propagates.
    template <class Work>
    decltype(auto) savepoint(Work&& work) {
        return tx_.savepoint(std::forward<Work>(work));
    }
    [[nodiscard]] transaction_state state() const noexcept { return tx_.state(); }

private:
    transaction& tx_;
};

// Declare it for a struct SOCI already maps (soci::type_conversion) to return it
// from once() without a codec: the record keeps the row's key, and a replay reads
// the row back through the same mapping, in the replaying transaction, so it
// shows what the first run committed (keep such rows immutable).
//
//   template <> struct idem::stored_row<transfer> {
//       static std::string key(const transfer& t) { return t.id; }
//       static std::optional<transfer> read(soci::session& sql, const std::string& id) {
//           transfer t;
//           sql << "SELECT * FROM transfers WHERE id = :id", soci::use(id), soci::into(t);
//           return sql.got_data() ? std::optional(t) : std::nullopt;
//       }
//   };
template <class T>
struct stored_row;

namespace detail {

template <class T>
concept has_stored_row = requires(const T& value, soci::session& sql, const std::string& key) {
    { stored_row<T>::key(value) } -> std::convertible_to<std::string>;
    { stored_row<T>::read(sql, key) } -> std::same_as<std::optional<T>>;
};

// Stores nothing and replays nothing: the result of work that returns void.
struct unit {};
class unit_codec final : public result_codec<unit> {
public:
    [[nodiscard]] std::string serialize(const unit&) const override { return {}; }
    [[nodiscard]] unit deserialize(std::string_view) const override { return {}; }
};

[[nodiscard]] IDEM_API long long parse_signed(std::string_view payload, long long min, long long max);
[[nodiscard]] IDEM_API unsigned long long parse_unsigned(std::string_view payload, unsigned long long max);

// Integers stored as decimal text.
template <std::integral T>
class integer_codec final : public result_codec<T> {
public:
    [[nodiscard]] std::string serialize(const T& value) const override { return std::to_string(value); }
    [[nodiscard]] T deserialize(std::string_view payload) const override { return parse_integer<T>(payload); }

private:
    template <class I>
    static I parse_integer(std::string_view payload) {
        if constexpr (std::is_signed_v<I>)
            return static_cast<I>(parse_signed(payload, static_cast<long long>(std::numeric_limits<I>::min()),
                                               static_cast<long long>(std::numeric_limits<I>::max())));
        else
            return static_cast<I>(
                parse_unsigned(payload, static_cast<unsigned long long>(std::numeric_limits<I>::max())));
    }
};

// A stored_row type: the row's key in the record, the row read back on replay.
template <has_stored_row T>
class row_codec final : public result_codec<T> {
public:
    explicit row_codec(transaction& tx) noexcept : tx_(tx) {}
    [[nodiscard]] std::string serialize(const T& value) const override { return stored_row<T>::key(value); }
    [[nodiscard]] T deserialize(std::string_view payload) const override {
        std::optional<T> row = stored_row<T>::read(tx_.session(), std::string(payload));
        if (!row) throw std::runtime_error("idem: the row a record names is gone");
        return std::move(*row);
    }

private:
    transaction& tx_;
};

template <class>
inline constexpr bool no_default_codec = false;

// What one run of a unit of work tells the retry loop.
struct unit_run {
    bool committing = false;  // the work returned: a failure now comes from COMMIT (or what is sent with it)
};

}  // namespace detail

class IDEM_API database {
public:
    // Opens the record store and the session pool: std::invalid_argument for a URL
    // that is none of database_url's forms, options_error naming every invalid
    // option, store_error when the database cannot be opened.
    [[nodiscard]] static database open(std::string_view url, database_options options = {});

    database(database&&) noexcept;
    database& operator=(database&&) noexcept;
    ~database();

    // Applies idem's pending schema migrations; returns their names. Safe to repeat,
    // and from several processes at once.
    std::vector<std::string> migrate();

    // Runs work(unit_of_work&) in a transaction on a pooled session: committed when
    // it returns, rolled back when it throws. Returns what work returns. Called
    // inside another unit of work of this database on the same thread, it joins
    // that transaction behind a savepoint.
    template <class Work>
    std::invoke_result_t<Work&, unit_of_work&> transact(Work&& work) {
        using result_type = std::invoke_result_t<Work&, unit_of_work&>;
        return run_returning<result_type>([&](transaction_runner& runner, detail::unit_run& run) {
            return runner.run([&](transaction& tx) -> result_type {
                unit_of_work uow(tx);
                if constexpr (std::is_void_v<result_type>) {
                    work(uow);
                    run.committing = true;
                } else {
                    result_type result = work(uow);
                    run.committing = true;
                    return result;
                }
            });
        });
    }

    // Runs work(soci::session&) on a pooled session outside any transaction
    // (plain reads; each statement commits by itself). Retried when the
    // connection was lost.
    template <class Work>
    std::invoke_result_t<Work&, soci::session&> read(Work&& work) {
        using result_type = std::invoke_result_t<Work&, soci::session&>;
        return run_returning<result_type>(
            [&](transaction_runner& runner, detail::unit_run&) { return work(session_of(runner)); });
    }

    // Runs work(unit_of_work&) at most once per key: the reserve, the work's writes
    // and the completed record in one transaction. The result type picks the codec:
    // std::string stores itself, integers their decimal text, void nothing, a
    // stored_row type its row's key; anything else needs a codec.
    template <class Work>
    auto once(const record_key& key, std::string_view fingerprint, Work&& work, const execution_options& options = {}) {
        using result_type = std::invoke_result_t<Work&, unit_of_work&>;
        if constexpr (std::is_void_v<result_type>) {
            auto e = once(
                key, fingerprint, [&](unit_of_work& uow) { return (work(uow), detail::unit{}); }, detail::unit_codec{},
                options);
            return execution<void>(e.status(), e.enforce_decision(), e.mode());
        } else if constexpr (std::is_same_v<result_type, std::string>) {
            return once(key, fingerprint, work, string_codec{}, options);
        } else if constexpr (std::is_integral_v<result_type> && !std::is_same_v<result_type, bool>) {
            return once(key, fingerprint, work, detail::integer_codec<result_type>{}, options);
        } else if constexpr (detail::has_stored_row<result_type>) {
            return once_with<result_type>(key, fingerprint, work, options,
                                          [](transaction& tx) { return detail::row_codec<result_type>(tx); });
        } else {
            static_assert(detail::no_default_codec<result_type>,
                          "idem::database::once: this result type has no default codec; pass a codec "
                          "(idem::make_codec), or declare idem::stored_row<T> for a row SOCI maps");
        }
    }

    // The same with an explicit codec (and its classification of results).
    template <class Work, class T>
    execution<T> once(const record_key& key, std::string_view fingerprint, Work&& work, const result_codec<T>& codec,
                      const execution_options& options = {}) {
        return once_with<T>(key, fingerprint, work, options,
                            [&](transaction&) -> const result_codec<T>& { return codec; });
    }

    // The executor behind once(), for everything else it does (lease mode, Observe, ...).
    [[nodiscard]] idem::executor& executor() noexcept;
    [[nodiscard]] transactional_record_store& store() noexcept;
    [[nodiscard]] std::shared_ptr<transactional_record_store> shared_store() const noexcept;
    // Schema, purge and inspection.
    [[nodiscard]] store_admin& admin() noexcept;
    [[nodiscard]] database_url::backend backend() const noexcept;

private:
    struct impl;
    explicit database(std::unique_ptr<impl> impl) noexcept;

    template <class T, class Work, class MakeCodec>
    execution<T> once_with(const record_key& key, std::string_view fingerprint, Work& work,
                           const execution_options& options, MakeCodec&& make_codec);

    template <class Result, class Body>
    Result run_returning(Body&& body) {
        if constexpr (std::is_void_v<Result>) {
            auto erased = [&](transaction_runner& runner, detail::unit_run& run) { body(runner, run); };
            run_unit(erased);
        } else {
            std::optional<Result> result;
            auto erased = [&](transaction_runner& runner, detail::unit_run& run) { result.emplace(body(runner, run)); };
            run_unit(erased);
            return std::move(*result);
        }
    }

    // Borrows a session (or joins this thread's unit of work on this database), runs
    // `body` and retries transient failures as a whole; see the header comment.
    void run_unit(detail::function_ref<void(transaction_runner&, detail::unit_run&)> body);
    static soci::session& session_of(transaction_runner& runner) noexcept;

    std::unique_ptr<impl> impl_;
};

template <class T, class Work, class MakeCodec>
execution<T> database::once_with(const record_key& key, std::string_view fingerprint, Work& work,
                                 const execution_options& options, MakeCodec&& make_codec) {
    return run_returning<execution<T>>([&](transaction_runner& runner, detail::unit_run& run) {
        return detail::run_owned<T>(
            executor(), runner,
            [&](transaction& tx, detail::owned_run& owned) {
                run.committing = false;
                decltype(auto) codec = make_codec(tx);
                auto bound = [&]() -> T {
                    unit_of_work uow(tx);
                    return work(uow);
                };
                execution<T> e =
                    detail::executor_access::execute(executor(), tx, owned, key, fingerprint, options, bound, codec);
                run.committing = true;
                return e;
            },
            detail::commit_always{});
    });
}

}  // namespace idem
