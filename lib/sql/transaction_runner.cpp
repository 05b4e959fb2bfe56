#include "idem/transaction_runner.hpp"

#include <atomic>
#include <exception>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "idem/detail/unit_state.hpp"
#include "idem/error.hpp"
#include "sql/answer_watch.hpp"
#include "sql/open_transactions.hpp"
#include "sql/sql_connection.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/sql_transaction.hpp"

namespace idem {
namespace {

// The transactions open on this thread, innermost last: runners begin and end a
// transaction on the same thread (run() is synchronous).
struct open_units {
    std::vector<unit_of_work*> units;
    ~open_units();
};
// Set when this thread's list is destroyed: exit() destroys it before the static
// objects, and a static runner destroyed then still closes its transaction.
// Trivially destructible, so it can be read until the thread ends.
thread_local bool open_units_gone = false;
open_units::~open_units() {
    open_units_gone = true;
}
thread_local open_units open_on_this_thread;

// Where a runner's transaction is: one value, so that "open", "BEGIN held back"
// and "in doubt" cannot disagree.
enum class stage {
    none,           // no transaction has run yet
    begin_held,     // open; BEGIN is held back for a store's first statement (the fast path)
    active,         // open; BEGIN was sent
    open_in_doubt,  // open, but a savepoint could not be rolled back: it can only be rolled back
    committed,      // ended
    rolled_back,    // ended
    in_doubt,       // ended, and whether it committed is unknown
};

[[nodiscard]] transaction_state state_of(stage s) noexcept {
    switch (s) {
        case stage::none:
        case stage::committed: return transaction_state::committed;
        case stage::begin_held:
        case stage::active: return transaction_state::active;
        case stage::rolled_back: return transaction_state::rolled_back;
        case stage::open_in_doubt:
        case stage::in_doubt: return transaction_state::in_doubt;
    }
    return transaction_state::in_doubt;
}

// Throws a transaction_error carrying `cause` (the exception that made us roll
// back) as its nested exception, so the caller still sees why.
[[noreturn]] void throw_in_doubt(std::string_view what, const std::exception& failure, std::exception_ptr cause) {
    transaction_error error("idem: " + std::string(what) + " failed, the transaction is in doubt: " + failure.what());
    if (!cause) throw error;
    try {
        std::rethrow_exception(cause);
    } catch (...) {
        std::throw_with_nested(error);
    }
}

}  // namespace

class IDEM_LOCAL transaction_runner::impl final : public unit_of_work, public detail::sql_transaction {
public:
    impl(soci::session& session, const transaction_options& options)
        : session_(session),
          dialect_(detail::dialect_of(session)),
          connection_(dialect_.connect(session, dialect_.begin_sql(options))),
          telemetry_(options.telemetry ? options.telemetry : null_sink()),
          keeps_statements_(!options.transaction_pooler),
          max_message_bytes_(options.max_message_bytes),
          answer_timeout_(options.answer_timeout),
          isolation_(options.isolation) {}

    // Only reachable when the runner dies inside run() (exit() called from the
    // work destroys a static runner): leave nothing open on the session, and tell
    // the telemetry sink how that went, since a destructor cannot throw.
    ~impl() override {
        if (!open()) return;
        if (stage_ == stage::begin_held) {  // nothing was sent: there is nothing to roll back
            close(stage::rolled_back);
            return;
        }
        try {
            connection_->rollback();
            close(stage::rolled_back);
            report(log_level::warning, "idem.transaction.abandoned",
                   "the runner was destroyed inside run(); its transaction was rolled back");
        } catch (const std::exception& failure) {
            if (connection_->broken()) {
                close(stage::rolled_back);
                report(log_level::warning, "idem.transaction.abandoned",
                       "the runner was destroyed inside run() on a connection that is gone; the server ends "
                       "the transaction: ",
                       failure.what());
            } else {
                close(stage::in_doubt);
                report(log_level::error, "idem.transaction.rollback_failed",
                       "the runner was destroyed inside run() and its ROLLBACK failed; the transaction is in doubt: ",
                       failure.what());
            }
        } catch (...) {
            close(stage::in_doubt);
            report(log_level::error, "idem.transaction.rollback_failed",
                   "the runner was destroyed inside run() and its ROLLBACK failed; the transaction is in doubt");
        }
    }

    soci::session& sql() override {
        flush();
        return session_;
    }
    [[nodiscard]] transaction_state state() const noexcept override { return state_of(stage_); }
    detail::sql_transaction& internals() noexcept override { return *this; }

    // detail::sql_transaction
    [[nodiscard]] const detail::sql_dialect& dialect() const noexcept override { return dialect_; }
    std::shared_ptr<void>& connection_cache(std::uint64_t owner) override { return cache_[owner]; }
    detail::unit_state& features() override {
        require_usable();
        if (!unit_) unit_ = std::make_unique<detail::unit_state>(depth_);
        return *unit_;
    }
    detail::unit_state* features_if_any() noexcept override { return unit_.get(); }
    [[nodiscard]] bool keeps_statements() const noexcept override { return keeps_statements_; }
    [[nodiscard]] std::size_t max_message_bytes() const noexcept override { return max_message_bytes_; }

    [[nodiscard]] bool open() const noexcept {
        return stage_ == stage::begin_held || stage_ == stage::active || stage_ == stage::open_in_doubt;
    }
    [[nodiscard]] bool ran() const noexcept { return stage_ != stage::none; }

    // `fast` (PostgreSQL): hold BEGIN back until a store sends it with its first
    // statement, or until anything else needs the transaction.
    void begin(bool fast) {
        open_on_this_thread.units.reserve(open_on_this_thread.units.size() + 1);  // close() must not allocate
        fast_ = fast && connection_->can_finish();
        // Watched from its first statement (BEGIN itself may meet a stopped server) to its end.
        watched_ = detail::answer_watch::watch(connection_->socket(), answer_timeout_);
        if (!fast_) {
            try {
                connection_->begin();
            } catch (...) {
                watched_ = {};
                throw;
            }
        }
        open_on_this_thread.units.push_back(this);
        stage_ = fast_ ? stage::begin_held : stage::active;
        depth_ = 0;
        unit_.reset();
        ++serial_;
    }

    void commit() {
        if (stage_ == stage::open_in_doubt) {
            const transaction_error refused(
                "idem: a savepoint could not be rolled back, so the transaction is in doubt");
            rollback(nullptr);
            throw refused;
        }
        if (unit_) {
            // What the unit of work holds back (its changed objects, ...) and its
            // before_commit hooks, while the transaction can still roll back.
            try {
                unit_->prepare_commit(*this);
            } catch (...) {
                rollback(std::current_exception());
                throw;
            }
        }
        if (stage_ == stage::begin_held) {  // nothing was sent: there is nothing to commit
            close(stage::committed);
            finish_unit(detail::unit_end::committed, false);
            return;
        }
        try {
            if (!deferred_.empty()) {
                const std::vector<std::unique_ptr<detail::deferred_statement>> last = std::exchange(deferred_, {});
                connection_->finish(last, true);
            } else {
                connection_->commit();
            }
        } catch (const error& e) {
            // A COMMIT that failed may leave the transaction open (SQLite: busy; PostgreSQL:
            // the statement before it failed); end it. An answer from the server (the
            // statement sent with COMMIT refused, the COMMIT refused) means nothing
            // committed, even if the connection breaks before the ROLLBACK: only a
            // connection lost before the answer leaves the COMMIT's fate unknown.
            rollback(std::current_exception(), e.is_connection_lost());
            throw;
        } catch (...) {
            rollback(std::current_exception(), true);
            throw;
        }
        close(stage::committed);
        finish_unit(detail::unit_end::committed, false);
    }

    // Rolls the whole transaction back; `cause` is the exception that led here,
    // if any, and `after_commit` says whether a COMMIT was sent before.
    void rollback(std::exception_ptr cause, bool after_commit = false) {
        deferred_.clear();
        if (stage_ == stage::begin_held) {
            close(stage::rolled_back);
            finish_unit(detail::unit_end::rolled_back, cause != nullptr);
            return;
        }
        try {
            connection_->rollback();
        } catch (const std::exception& failure) {
            if (connection_->broken()) {
                // The server ends the transaction of a connection that is gone: it cannot
                // commit any more, unless the COMMIT sent before reached it.
                // The caller rethrows why it rolled back (a connection_lost store_error after a COMMIT).
                close(after_commit ? stage::in_doubt : stage::rolled_back);
                finish_unit(detail::unit_end::rolled_back, true);
                return;
            }
            close(stage::in_doubt);
            throw_in_doubt("ROLLBACK", failure, cause);
        }
        close(stage::rolled_back);
        finish_unit(detail::unit_end::rolled_back, cause != nullptr);
    }

    // detail::fast_path
    [[nodiscard]] const char* held_begin() const noexcept override {
        return stage_ == stage::begin_held ? connection_->begin_sql().c_str() : nullptr;
    }
    void begin_sent() noexcept override {
        if (stage_ == stage::begin_held) stage_ = stage::active;
    }
    [[nodiscard]] isolation_level isolation() const noexcept override { return isolation_; }
    soci::session& store_session() override {
        run_deferred();
        return session_;
    }
    soci::session& deferring_session() noexcept override { return session_; }
    [[nodiscard]] bool may_defer() const noexcept override { return fast_ && stage_ == stage::active && depth_ == 0; }
    void defer(std::unique_ptr<detail::deferred_statement> statement) override {
        if (!may_defer()) throw std::logic_error("idem: this transaction cannot defer a statement");
        deferred_.push_back(std::move(statement));
    }
    [[nodiscard]] std::uint64_t serial() const noexcept override { return serial_; }

protected:
    std::string begin_savepoint() override {
        require_usable();
        // What the unit of work holds back belongs before the savepoint, so that a
        // rollback to it undoes only what came after; it may defer statements,
        // which go out before the SAVEPOINT too.
        if (unit_) unit_->flush(*this);
        flush();
        std::string name = "idem_savepoint_" + std::to_string(depth_ + 1);
        connection_->execute("SAVEPOINT " + name, "SAVEPOINT");
        ++depth_;
        if (unit_) unit_->savepoint_opened(depth_);
        return name;
    }

    void release_savepoint(const std::string& name) override {
        // Inside the savepoint: a failure here still rolls back to it.
        if (unit_) unit_->flush(*this);
        connection_->execute("RELEASE SAVEPOINT " + name, "RELEASE SAVEPOINT");
        if (unit_) unit_->savepoint_released(depth_);
        --depth_;
    }

    void rollback_to_savepoint(const std::string& name) override {
        const std::exception_ptr cause = std::current_exception();
        const int depth = depth_--;
        if (unit_) unit_->savepoint_rolled_back(depth);
        try {
            connection_->execute("ROLLBACK TO SAVEPOINT " + name, "ROLLBACK TO SAVEPOINT");
            connection_->execute("RELEASE SAVEPOINT " + name, "RELEASE SAVEPOINT");
        } catch (const std::exception& failure) {
            // The database may have ended the whole transaction (SQLite does on
            // some I/O errors): what the outer work did is no longer certain.
            stage_ = stage::open_in_doubt;
            // A connection that is gone takes the whole transaction with it; the
            // outermost level reports that as the failure it is.
            if (cause && connection_->broken()) std::rethrow_exception(cause);
            throw_in_doubt("ROLLBACK TO SAVEPOINT", failure, cause);
        }
    }

private:
    void require_usable() const {
        if (!open()) throw std::logic_error("idem: the transaction has ended");
        if (stage_ == stage::open_in_doubt)
            throw transaction_error("idem: the transaction is in doubt; it can only be rolled back");
    }

    // Sends what the fast path held back, in order, before anything else uses the transaction.
    void flush() {
        if (stage_ == stage::begin_held) {
            stage_ = stage::active;  // a BEGIN that fails midway is still ended by ROLLBACK
            connection_->begin();
        }
        run_deferred();
    }

    void run_deferred() {
        if (deferred_.empty()) return;
        const std::vector<std::unique_ptr<detail::deferred_statement>> held = std::exchange(deferred_, {});
        connection_->finish(held, false);
    }

    // `ended`: committed, rolled_back or in_doubt.
    void close(stage ended) noexcept {
        watched_ = {};
        if (!open_units_gone) std::erase(open_on_this_thread.units, this);
        stage_ = ended;
        depth_ = 0;
        fast_ = false;
        deferred_.clear();
        // An end in doubt runs no hook: neither after_commit nor after_rollback is known to be true.
        if (ended == stage::in_doubt) finish_unit(detail::unit_end::in_doubt, true);
    }

    // What the destructor cannot throw, logged instead; never throws itself.
    void report(log_level level, std::string_view event, std::string_view message,
                std::string_view failure = {}) const noexcept {
        try {
            const std::string text = std::string(message) + std::string(failure);
            telemetry_->on_log({.level = level, .name = event, .key_hash = {}, .message = text});
        } catch (...) {
            // Out of memory for the message: nothing left to tell it with.
        }
    }

    // The transaction is known to have ended: its hooks run with the unit's state
    // already dropped (a hook may start another unit of work on this runner).
    void finish_unit(detail::unit_end how, bool quiet) {
        const std::unique_ptr<detail::unit_state> ended = std::move(unit_);
        if (ended) ended->finish(how, quiet);
    }

    soci::session& session_;
    const detail::sql_dialect& dialect_;
    std::unique_ptr<detail::sql_connection> connection_;
    detail::answer_watch::registration watched_;  // after connection_: ends before its socket can
    std::unordered_map<std::uint64_t, std::shared_ptr<void>> cache_;
    std::vector<std::unique_ptr<detail::deferred_statement>> deferred_;  // in the order deferred
    std::unique_ptr<detail::unit_state> unit_;  // created on first use, dropped when the transaction ends
    std::shared_ptr<telemetry_sink> telemetry_;
    bool keeps_statements_;
    std::size_t max_message_bytes_;
    std::chrono::milliseconds answer_timeout_;
    isolation_level isolation_;
    stage stage_ = stage::none;
    bool fast_ = false;  // this transaction may hold BEGIN back and send a statement with COMMIT
    int depth_ = 0;
    std::uint64_t serial_ = 0;

    friend class transaction_runner;
};

std::span<unit_of_work* const> detail::open_transactions() noexcept {
    if (open_units_gone) return {};
    return open_on_this_thread.units;
}

std::uint64_t detail::new_connection_cache_owner() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
}

transaction_runner::transaction_runner(soci::session& session, transaction_options options)
    : impl_(std::make_unique<impl>(session, options)) {}

transaction_runner::~transaction_runner() = default;

soci::session& transaction_runner::session() const noexcept {
    return impl_->session_;
}
bool transaction_runner::in_transaction() const noexcept {
    return impl_->open();
}

std::optional<transaction_state> transaction_runner::last_state() const noexcept {
    if (!impl_->ran()) return std::nullopt;
    return impl_->state();
}

unit_of_work& transaction_runner::enter(std::string& savepoint, bool fast) {
    if (impl_->open())
        savepoint = impl_->begin_savepoint();
    else
        impl_->begin(fast);
    return *impl_;
}

void transaction_runner::leave(const std::string& savepoint, bool commit) {
    if (savepoint.empty()) {
        if (commit)
            impl_->commit();
        else
            impl_->rollback(nullptr);
    } else if (commit) {
        impl_->release_savepoint(savepoint);
    } else {
        impl_->rollback_to_savepoint(savepoint);
    }
}

void transaction_runner::abandon(const std::string& savepoint) {
    if (impl_->open()) {
        if (!savepoint.empty()) {
            // A failure the savepoint already reported leaves nothing to undo here.
            if (impl_->state() == transaction_state::active) impl_->rollback_to_savepoint(savepoint);
        } else {
            impl_->rollback(std::current_exception());
        }
    }
    throw;
}

}  // namespace idem
