// idem/database.hpp: the SQL front door. One URL opens the record store and a
// pool of SOCI sessions on the same database; units of work run on them, at
// most once per key, with the record in the business transaction.
//
//   idem::database db = idem::database::open("sqlite:bank.db", {.pool_size = 8});
//   db.migrate();
//   idem::record_key key{"bank.transfer", idem::scope::tenant("acme"), request_key};
//   auto e = db.once(key, fingerprint, [&](idem::unit_of_work& uow) {
//       uow.sql() << "UPDATE accounts SET balance = balance - :a WHERE id = :id", soci::use(amount), soci::use(from);
//       return std::string("moved");
//   });
//
// Retries, in-doubt commits, borrow(): docs/database.md (link idem_database).
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
#include "idem/detail/run_owned.hpp"
#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/mapping.hpp"
#include "idem/sqlite_options.hpp"
#include "idem/steps.hpp"
#include "idem/store_admin.hpp"
#include "idem/transaction_runner.hpp"
#include "idem/transactional_record_store.hpp"
#include "idem/unit_of_work.hpp"

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
    // The largest message (payload and headers) unit_of_work::publish accepts:
    // a larger one is message_too_large (idem/outbox.hpp).
    std::size_t max_message_bytes = 256 * 1024;
    // PostgreSQL and MariaDB: a unit of work whose server has sent nothing for
    // this long has its connection ended, and fails as on a lost connection
    // (run again, or transaction_in_doubt after COMMIT). A server stopped or
    // frozen (SIGSTOP, a paused VM) still acknowledges TCP, so keepalives never
    // end such a connection (docs/ha.md). A statement that runs this long on a
    // healthy server, or a unit of work idle this long between statements, is
    // ended too. The record store opened from the URL bounds its own connections
    // (a reservation made before the work) the same. Zero: wait for good.
    std::chrono::milliseconds answer_timeout{30'000};
};

namespace detail {

// A mapped result (idem/mapping.hpp): the record keeps the row's key, and a
// replay reads the row back through the mapping, in the replaying transaction.
template <mapped T>
class mapped_codec final : public result_codec<T> {
public:
    explicit mapped_codec(unit_of_work& uow) noexcept : uow_(uow) {}
    [[nodiscard]] std::string serialize(const T& value) const override {
        const table& type = table_of<T>();
        cell key;
        type.fields[type.key].read(&value, key);
        return key_text(type, key);
    }
    [[nodiscard]] T deserialize(std::string_view payload) const override {
        const table& type = table_of<T>();
        cell key;
        if (type.fields[type.key].kind == field_kind::text)
            key.text = std::string(payload);
        else
            key.integer =
                parse_signed(payload, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max());
        T row{};
        if (!mapped_session::read(uow_, type, key, &row))
            throw std::runtime_error("idem: the row a record names is gone");
        return row;
    }

private:
    unit_of_work& uow_;
};

// The codec once() uses when it is given none: the result type's default_codec,
// or a mapped type's mapped_codec, which reads the row back in `uow`.
template <class R>
auto codec_in(unit_of_work& uow) {
    if constexpr (mapped<R>) {
        return mapped_codec<R>(uow);
    } else {
        static_assert(has_default_codec<R>,
                      "idem::database::once: this result type has no default codec; pass a codec "
                      "(idem::make_codec), or map it (idem::mapping<T>, idem/mapping.hpp)");
        return default_codec<R>{};
    }
}

// A unit of work commits when it returns, unless its codec classified the result
// release: all it did was in this transaction, so rolling back undoes it.
template <class T>
bool commits(const execution<T>& e, const result_codec<T>& codec) {
    return !(e.status() == execution_status::executed && e.has_value() &&
             codec.classify(e.value()) == classification::release);
}

// What one run of a unit of work tells the retry loop.
struct unit_run {
    bool committing = false;  // the work returned: a failure now comes from COMMIT (or what is sent with it)
};

}  // namespace detail

class borrowed_session;

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
        return transact_on(nullptr, work, commit_always{});
    }

    // The same, committing only when should_commit(result) is true (should_commit()
    // for void work); otherwise it rolls back and still returns the result.
    template <class Work, class ShouldCommit>
    std::invoke_result_t<Work&, unit_of_work&> transact(Work&& work, ShouldCommit&& should_commit) {
        return transact_on(nullptr, work, should_commit);
    }

    // Runs work(soci::session&) on a pooled session outside any transaction
    // (plain reads; each statement commits by itself). Retried when the
    // connection was lost.
    template <class Work>
    std::invoke_result_t<Work&, soci::session&> read(Work&& work) {
        using result_type = std::invoke_result_t<Work&, soci::session&>;
        return run_returning<result_type>(
            nullptr, [&](transaction_runner& runner, detail::unit_run&) { return work(session_of(runner)); });
    }

    // Runs work(unit_of_work&) at most once per key: the work's writes and the
    // completed record in one transaction (on PostgreSQL with no round trip beyond
    // the work's statements). The work's changed objects are flushed when it
    // returns, before the record. The result type picks the codec (default_codec):
    // std::string stores itself, integers their decimal text, void nothing, a
    // mapped type its row's key; anything else needs a codec.
    template <class Work>
    auto once(const record_key& key, std::string_view fingerprint, Work&& work, const execution_options& options = {}) {
        return once_on(nullptr, key, fingerprint, work, options);
    }

    // The same with an explicit codec. A result it classifies release rolls the
    // unit of work back (its effects were all in the transaction) and frees the key.
    template <class Work, class T>
    execution<T> once(const record_key& key, std::string_view fingerprint, Work&& work, const result_codec<T>& codec,
                      const execution_options& options = {}) {
        return once_with<T>(nullptr, key, fingerprint, work, options,
                            [&](unit_of_work&) -> const result_codec<T>& { return codec; });
    }

    // Runs operation(idem::steps&) at most once per key, in steps: each
    // op.step(name, work) one transaction that stores its result, each
    // op.call(name, call) outside any transaction with a call key of its own,
    // the returned value stored and replayed as once's (idem/steps.hpp,
    // docs/steps.md). A rerun resumes after the last stored step; while another
    // run's lease is live it answers in_flight, another fingerprint key_reused.
    // Not to be called inside a unit of work.
    template <class Operation>
    auto steps(const record_key& key, std::string_view fingerprint, Operation&& operation,
               const execution_options& options = {}) {
        using result_type = std::invoke_result_t<Operation&, idem::steps&>;
        if constexpr (std::is_void_v<result_type>) {
            auto returning_unit = [&](idem::steps& op) { return (operation(op), detail::unit{}); };
            auto e = steps(key, fingerprint, returning_unit, default_codec<detail::unit>{}, options);
            return execution<void>(e.status(), e.enforce_decision(), e.mode());
        } else {
            return steps(key, fingerprint, operation, default_codec<result_type>{}, options);
        }
    }

    // The same with an explicit codec for the final result; one it classifies
    // release deletes the operation and its steps (their effects were undone).
    template <class Operation, class T>
    execution<T> steps(const record_key& key, std::string_view fingerprint, Operation&& operation,
                       const result_codec<T>& codec, const execution_options& options = {}) {
        return run_steps(key, fingerprint, {}, false, operation, codec, options);
    }

    // CREATE TABLE IF NOT EXISTS for a mapped type, with column types from its
    // members (for examples and tests: production schemas are the application's
    // migrations).
    template <mapped T>
    void create_table() {
        transact([](unit_of_work& uow) { detail::mapped_session::create_table(uow, detail::table_of<T>()); });
    }

    // The same units of work on a session the application owns (opened on the
    // same database), instead of a pooled one; see borrowed_session.
    [[nodiscard]] borrowed_session borrow(soci::session& session);

    // The executor behind once(), for everything else it does (lease mode, Observe, ...).
    [[nodiscard]] idem::executor& executor() noexcept;
    [[nodiscard]] transactional_record_store& store() noexcept;
    [[nodiscard]] std::shared_ptr<transactional_record_store> shared_store() const noexcept;
    // Schema, purge and inspection.
    [[nodiscard]] store_admin& admin() noexcept;
    // The store it opened, by its URL's scheme ("sqlite", "postgresql"; database_url::scheme),
    // valid as long as the database; idem::registered_store(engine()) (idem/store_registry.hpp) describes it.
    [[nodiscard]] std::string_view engine() const noexcept;

private:
    friend class borrowed_session;
    template <class>
    friend class operation;
    friend class completer;
    struct impl;
    explicit database(std::unique_ptr<impl> impl) noexcept;

    // The templates below run on `on` (a borrowed session's runner) or, when it
    // is null, on a pooled session.
    struct commit_always {
        template <class... Result>
        bool operator()(const Result&...) const noexcept {
            return true;
        }
    };

    template <class Work, class ShouldCommit>
    std::invoke_result_t<Work&, unit_of_work&> transact_on(transaction_runner* on, Work& work,
                                                           ShouldCommit&& should_commit) {
        using result_type = std::invoke_result_t<Work&, unit_of_work&>;
        return run_returning<result_type>(on, [&](transaction_runner& runner, detail::unit_run& run) {
            bool commit = true;
            return runner.run(
                [&](unit_of_work& uow) -> result_type {
                    if constexpr (std::is_void_v<result_type>) {
                        work(uow);
                        commit = static_cast<bool>(should_commit());
                        run.committing = commit;
                    } else {
                        result_type result = work(uow);
                        commit = static_cast<bool>(should_commit(std::as_const(result)));
                        run.committing = commit;
                        return result;
                    }
                },
                [&](const auto&...) { return commit; });
        });
    }

    template <class Work>
    auto once_on(transaction_runner* on, const record_key& key, std::string_view fingerprint, Work& work,
                 const execution_options& options) {
        using result_type = std::invoke_result_t<Work&, unit_of_work&>;
        if constexpr (std::is_void_v<result_type>) {
            auto returning_unit = [&](unit_of_work& uow) { return (work(uow), detail::unit{}); };
            const default_codec<detail::unit> codec;
            auto e = once_with<detail::unit>(on, key, fingerprint, returning_unit, options,
                                             [&](unit_of_work&) -> const result_codec<detail::unit>& { return codec; });
            return execution<void>(e.status(), e.enforce_decision(), e.mode());
        } else {
            return once_with<result_type>(on, key, fingerprint, work, options,
                                          [](unit_of_work& uow) { return detail::codec_in<result_type>(uow); });
        }
    }

    // An operation in steps begun with `input` (empty for steps(); an
    // idem::operation's own otherwise) and whether it registers a compensation:
    // begun, replayed or taken over, run, finished.
    template <class Operation, class T>
    execution<T> run_steps(const record_key& key, std::string_view fingerprint, const std::string& input,
                           bool compensates, Operation& operation, const result_codec<T>& codec,
                           const execution_options& options) {
        idem::steps op = start_steps(key, fingerprint, input, compensates, options);
        const execution_status decision = op.decision();
        if (decision == execution_status::replayed)
            return execution<T>(decision, decision, mode::enforce, codec.deserialize(op.stored_result()));
        if (decision != execution_status::executed) return execution<T>(decision, decision, mode::enforce, {});
        std::optional<T> result;
        try {
            result.emplace(operation(op));
            op.finish(codec.serialize(*result), codec.classify(*result));
        } catch (...) {
            op.abandon();
            throw;
        }
        return execution<T>(decision, decision, mode::enforce, std::move(result));
    }

    [[nodiscard]] idem::steps start_steps(const record_key& key, std::string_view fingerprint, const std::string& input,
                                          bool compensates, const execution_options& options);
    // The completer's run of the unfinished operation `record_id` of `name_space`
    // whose lease ended; its decision is in_flight when there is none to take over.
    [[nodiscard]] idem::steps take_over(const std::string& record_id, const std::string& name_space,
                                        const detail::completion_policy& policy, const execution_options& options);

    template <class T, class Work, class MakeCodec>
    execution<T> once_with(transaction_runner* on, const record_key& key, std::string_view fingerprint, Work& work,
                           const execution_options& options, MakeCodec&& make_codec);

    template <class Result, class Body>
    Result run_returning(transaction_runner* on, Body&& body) {
        if constexpr (std::is_void_v<Result>) {
            auto erased = [&](transaction_runner& runner, detail::unit_run& run) { body(runner, run); };
            run_unit(on, erased);
        } else {
            std::optional<Result> result;
            auto erased = [&](transaction_runner& runner, detail::unit_run& run) { result.emplace(body(runner, run)); };
            run_unit(on, erased);
            return std::move(*result);
        }
    }

    // Runs `body` on `on`, or on a pooled session (or joins this thread's unit of
    // work on the same runner or database), and retries transient failures as a
    // whole; see the header comment.
    void run_unit(transaction_runner* on, detail::function_ref<void(transaction_runner&, detail::unit_run&)> body);
    static soci::session& session_of(transaction_runner& runner) noexcept;

    std::unique_ptr<impl> impl_;
};

// A database's units of work on a session the application owns: for a service
// that keeps its own soci::session (its own pool, its own settings) and wants
// the record in that session's transactions. The session must be connected to
// the same database as the store, with the store's backend loaded (a session
// opened with open_sqlite_session / open_postgresql_session, or by SOCI once
// the store exists); neither may be shared across threads, and the database
// must outlive this. Transient conflicts are retried as with pooled sessions,
// a lost connection is not (the session is the application's to reopen).
//
//   soci::session& mine = app_session();
//   idem::borrowed_session on_mine = db.borrow(mine);
//   auto e = on_mine.once(key, fingerprint, [&](idem::unit_of_work& uow) { return move(uow.sql()); });
class IDEM_API borrowed_session {
public:
    borrowed_session(database& db, soci::session& session);
    borrowed_session(borrowed_session&&) noexcept;
    borrowed_session& operator=(borrowed_session&&) noexcept;
    ~borrowed_session();

    template <class Work>
    std::invoke_result_t<Work&, unit_of_work&> transact(Work&& work) {
        return db_->transact_on(runner_.get(), work, database::commit_always{});
    }
    template <class Work>
    auto once(const record_key& key, std::string_view fingerprint, Work&& work, const execution_options& options = {}) {
        return db_->once_on(runner_.get(), key, fingerprint, work, options);
    }
    template <class Work, class T>
    execution<T> once(const record_key& key, std::string_view fingerprint, Work&& work, const result_codec<T>& codec,
                      const execution_options& options = {}) {
        return db_->once_with<T>(runner_.get(), key, fingerprint, work, options,
                                 [&](unit_of_work&) -> const result_codec<T>& { return codec; });
    }

private:
    database* db_;
    std::unique_ptr<transaction_runner> runner_;
};

template <class T, class Work, class MakeCodec>
execution<T> database::once_with(transaction_runner* on, const record_key& key, std::string_view fingerprint,
                                 Work& work, const execution_options& options, MakeCodec&& make_codec) {
    detail::publishing_call call;
    return run_returning<execution<T>>(on, [&](transaction_runner& runner, detail::unit_run& run) {
        bool commit = true;
        return detail::run_owned<T>(
            executor(), runner,
            [&](unit_of_work& uow, detail::owned_run& owned) {
                run.committing = false;
                decltype(auto) codec = make_codec(uow);
                // The work's held-back writes (its changed objects) go before the record.
                auto bound = [&]() -> T { return detail::flushed(uow, key, call, work); };
                execution<T> e = detail::executor_access::execute_in(executor(), uow, key, fingerprint, options, bound,
                                                                     codec, {}, &owned);
                commit = detail::commits(e, codec);
                run.committing = commit;
                return e;
            },
            [&](const execution<T>&) { return commit; });
    });
}

}  // namespace idem
