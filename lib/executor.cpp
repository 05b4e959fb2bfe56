#include "idem/executor.hpp"

#include <exception>

#include "idem/encryption.hpp"
#include "idem/transactional_record_store.hpp"
#include "internal/decision_outcome.hpp"

namespace idem {
namespace {

using detail::outcome_of;

execution_status status_of(reservation_status status) {
    switch (status) {
        case reservation_status::reserved: return execution_status::executed;
        case reservation_status::in_flight: return execution_status::in_flight;
        case reservation_status::completed: return execution_status::replayed;
        case reservation_status::fingerprint_mismatch: return execution_status::key_reused;
        case reservation_status::expired: return execution_status::expired;
    }
    return execution_status::executed;
}

// The store's side of a transaction, when it can join one. store_traits are the one
// statement of what a store can do, read here as by the contract suite; the cast
// only reaches the transaction overloads, and refuses a store whose traits claim
// what its type lacks.
transactional_record_store* joinable(record_store& store) {
    if (!store.traits().joins_transactions) return nullptr;
    auto* joined = dynamic_cast<transactional_record_store*>(&store);
    if (joined == nullptr)
        throw error(error_category::configuration,
                    "idem: the store's traits say joins_transactions, but it is no transactional_record_store");
    return joined;
}

// One call of the executor: the resolved settings, the store, and the steps of each mode.
class attempt {
public:
    attempt(record_store& store, unit_of_work* tx, telemetry_sink& telemetry, const record_key& key,
            std::string_view fingerprint, const resolved_options& settings, const execution_options& call,
            detail::erased_operation operation, std::stop_token stop, detail::owned_run* owned)
        : store_(store),
          joined_(tx != nullptr ? joinable(store) : nullptr),
          tx_(joined_ != nullptr ? tx : nullptr),
          telemetry_(telemetry),
          key_(key),
          fingerprint_(fingerprint),
          settings_(settings),
          about_{call.entry, key.name_space(), settings.profile, call.method, call.route},
          operation_(operation),
          stop_(std::move(stop)),
          // Only where nothing outside the transaction can tell that the work ran:
          // its opener rolls it back if the record cannot be inserted at the end.
          owned_(tx_ != nullptr && owned != nullptr && owned->role != detail::owned_role::joins && !call.reserve_first
                     ? owned
                     : nullptr) {}

    detail::verdict enforce() {
        if (owned_ != nullptr) {
            const record_lookup found = joined_->look_up(*tx_, key_, fingerprint_);
            if (found.what == record_lookup::found::answer) return answered(found.answer);
            if (owned_->role == detail::owned_role::answers) {
                owned_->progress = detail::owned_progress::unanswered;
                return {execution_status::in_flight, execution_status::in_flight, mode::enforce};
            }
            if (found.what == record_lookup::found::nothing) return run_then_insert();
            // In flight, or expired: reserving waits for, takes over or reports it.
        }
        const reservation r = tx_ != nullptr ? joined_->try_reserve(*tx_, key_, fingerprint_, settings_.lease)
                                             : store_.try_reserve(key_, fingerprint_, settings_.lease);
        if (r.status != reservation_status::reserved) return answered(r);
        const detail::produced result = run_reserved(r.token, tx_ != nullptr);
        settle(r.token, result, tx_ != nullptr);
        count(result.kind == classification::release ? outcome::released : outcome::executed);
        return {execution_status::executed, execution_status::executed, mode::enforce};
    }

    detail::verdict observe() {
        // The reservation never joins the business transaction: it must not wait for or fail it.
        std::optional<reservation> r;
        try {
            r = store_.try_reserve(key_, fingerprint_, settings_.lease);
        } catch (const std::exception& e) {
            if (stop_.stop_requested()) throw operation_cancelled();
            log(log_level::warning, "idem.observe.reserve_failed",
                std::string("the store failed to reserve; the operation runs without idempotency: ") + e.what());
            count(outcome::reserve_failed);
            (void)operation_.run(stop_);
            return {execution_status::executed, execution_status::executed, mode::observe};
        }
        const execution_status would = status_of(r->status);
        if (r->status != reservation_status::reserved) {
            count(outcome_of(would));
            (void)operation_.run(stop_);
            return {execution_status::executed, would, mode::observe};
        }
        const detail::produced result = run_reserved(r->token, false);
        if (tx_ != nullptr && stores_result(result.kind))
            record_in_transaction(r->token, result);
        else
            settle(r->token, result, false);
        count(result.kind == classification::release ? outcome::released : outcome::executed);
        return {execution_status::executed, would, mode::observe};
    }

private:
    detail::verdict answered(const reservation& r) {
        const execution_status status = status_of(r.status);
        if (r.status == reservation_status::completed) replay(r.payload);
        count(outcome_of(status));
        return {status, status, mode::enforce};
    }

    // The one-statement form: nothing was reserved, so a concurrent duplicate may
    // run too; the record inserted last, with COMMIT, lets only one of them commit.
    detail::verdict run_then_insert() {
        if (stop_.stop_requested()) {
            count(outcome::released);
            throw operation_cancelled();
        }
        detail::produced result{{}, classification::release};
        owned_->progress = detail::owned_progress::unreserved;
        try {
            result = run_operation();
        } catch (...) {
            if (known_rollback(std::current_exception()))
                log(log_level::info, "idem.operation.rolled_back",
                    "the operation failed and its transaction rolled back; no record was written");
            else
                log(log_level::warning, "idem.operation.failed",
                    "the operation threw; its transaction rolls back and no record is written");
            throw;
        }
        if (result.kind == classification::keep_in_flight) {
            log(log_level::info, "idem.result.kept_in_flight",
                "the result keeps the key in flight until its lease ends");
            joined_->insert(*tx_, key_, fingerprint_, std::nullopt, settings_.lease);
        } else if (result.kind != classification::release) {
            joined_->insert(*tx_, key_, fingerprint_, result.payload, retention_for(result.kind),
                            remember_for(result.kind));
        }
        if (result.kind != classification::release) owned_->progress = detail::owned_progress::inserted;
        owned_->pending = result.kind == classification::release ? outcome::released : outcome::executed;
        owned_->entry = about_.entry;
        owned_->mode = settings_.mode;
        owned_->profile = settings_.profile;
        return {execution_status::executed, execution_status::executed, mode::enforce};
    }

    static bool stores_result(classification kind) {
        return kind == classification::store || kind == classification::store_as_failure;
    }

    duration retention_for(classification kind) const {
        return kind == classification::store_as_failure ? settings_.failure_retention : settings_.retention;
    }

    // Only a result kept for the full retention is remembered past it: a failure's
    // short retention exists so that a retry may run again. A call whose own
    // retention outlasts the window keeps its record longer than a tombstone would.
    duration remember_for(classification kind) const {
        if (kind != classification::store || settings_.remember <= settings_.retention) return duration::zero();
        return settings_.remember;
    }

    // A sealed payload is opened first: a missing or wrong key is payload_unreadable, as it is.
    void replay(std::string_view stored) {
        std::string opened;
        std::string_view payload = stored;
        if (encryption_keys::is_sealed(stored)) {
            if (!settings_.encryption)
                throw payload_unreadable(payload_unreadable::reason::unknown_key,
                                         "idem: the stored result of key hash " + key_.key_hash() +
                                             " is sealed, and no encryption keys are configured");
            try {
                opened = settings_.encryption->open(stored, record_context());
            } catch (const payload_unreadable&) {
                log(log_level::error, "idem.replay.unreadable", "the stored result could not be opened");
                throw;
            }
            payload = opened;
        }
        try {
            operation_.replay(payload);
        } catch (const std::exception&) {
            log(log_level::error, "idem.replay.undecodable", "the stored result could not be decoded");
            std::throw_with_nested(
                store_error(store_failure::corrupt_record,
                            "idem: the stored result of key hash " + key_.key_hash() + " could not be decoded"));
        }
    }

    // Runs the operation on a key this call reserved, in the business transaction
    // (`in_transaction`) or through the store's own connections.
    detail::produced run_reserved(const std::string& token, bool in_transaction) {
        if (stop_.stop_requested()) {
            release(token, in_transaction);
            count(outcome::released);
            throw operation_cancelled();
        }
        try {
            return run_operation();
        } catch (...) {
            abandon(token, in_transaction);
            throw;
        }
    }

    // What a sealed payload is bound to: its record's digest.
    std::string_view record_context() const noexcept {
        return {reinterpret_cast<const char*>(key_.digest().data()), 16};
    }

    // Runs the operation; a result to store is sealed when encryption keys are set.
    detail::produced run_operation() {
        detail::produced result = operation_.run(stop_);
        if (settings_.encryption && stores_result(result.kind))
            result.payload = settings_.encryption->seal(result.payload, record_context());
        return result;
    }

    static bool known_rollback(const std::exception_ptr& failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const error& e) {
            return e.rolled_back();
        } catch (...) {
            return false;
        }
    }

    // The operation threw. Its outcome is unknown, so the key stays in flight, except
    // where its transaction is known to have rolled back (an idem::error that says so), or
    // where a transaction is known to undo it: Enforce reserved in that transaction, and
    // Observe inside one frees the reservation it made apart, as Enforce's rollback would.
    void abandon(const std::string& token, bool in_transaction) {
        if (known_rollback(std::current_exception())) {
            // idem::database says the operation's transaction rolled back: nothing it did
            // remains, so the key is freed at once instead of held for the lease.
            log(log_level::info, "idem.operation.rolled_back",
                "the operation failed and its transaction rolled back; the key is released");
            if (!in_transaction) release(token, false);
        } else if (in_transaction) {
            log(log_level::warning, "idem.operation.failed",
                "the operation threw; its transaction's rollback removes the reservation");
        } else if (tx_ != nullptr) {
            log(log_level::warning, "idem.operation.failed",
                "the operation threw inside a transaction; the reservation made outside it is released");
            release(token, false);
        } else {
            log(log_level::warning, "idem.operation.failed",
                "the operation threw; the key stays in flight until its lease ends");
        }
    }

    // Completes or releases as the codec classified. In the business transaction a
    // store error propagates (the transaction is lost anyway); outside it the result
    // is kept for the caller and the failure logged: the operation has already run.
    void settle(const std::string& token, const detail::produced& result, bool in_transaction) {
        if (result.kind == classification::keep_in_flight) {
            log(log_level::info, "idem.result.kept_in_flight",
                "the result keeps the key in flight until its lease ends");
            return;
        }
        if (result.kind == classification::release) {
            release(token, in_transaction);
            return;
        }
        try {
            const bool done = in_transaction ? joined_->complete(*tx_, key_, token, fingerprint_, result.payload,
                                                                 retention_for(result.kind), remember_for(result.kind))
                                             : store_.complete(key_, token, fingerprint_, result.payload,
                                                               retention_for(result.kind), remember_for(result.kind));
            if (!done)
                log(log_level::warning, "idem.complete.stale",
                    "the lease ended and another run took the key over; this result was not stored");
        } catch (const std::exception& e) {
            if (in_transaction) throw;
            log(log_level::error, "idem.complete.failed",
                std::string("the result could not be stored; a retry after the lease runs again: ") + e.what());
        }
    }

    // `then`: what becomes of the key when a release outside the transaction fails.
    void release(const std::string& token, bool in_transaction,
                 std::string_view then = "it frees when its lease ends") {
        try {
            const bool done = in_transaction ? joined_->release(*tx_, key_, token) : store_.release(key_, token);
            if (!done)
                log(log_level::warning, "idem.release.stale",
                    "the lease ended and another run took the key over; nothing was released");
        } catch (const std::exception& e) {
            if (in_transaction) throw;
            log(log_level::error, "idem.release.failed",
                "the key could not be released; " + std::string(then) + ": " + e.what());
        }
    }

    // Observe in a transaction: free the detached reservation, then write the result in the
    // business transaction behind a savepoint, so a failed write loses only the record. A
    // release that fails is logged (idem.release.failed) and leaves the reservation with this
    // call's token, which the write below then completes all the same.
    void record_in_transaction(const std::string& token, const detail::produced& result) {
        release(token, false, "the result is written over the reservation in the transaction");
        try {
            const bool done = tx_->savepoint([&] {
                return joined_->complete(*tx_, key_, token, fingerprint_, result.payload, retention_for(result.kind),
                                         remember_for(result.kind));
            });
            if (!done)
                log(log_level::warning, "idem.complete.stale",
                    "another run reserved the key meanwhile; this result was not stored");
        } catch (const std::exception& e) {
            if (tx_->state() != transaction_state::active) throw;  // the savepoint could not save the business
            log(log_level::warning, "idem.observe.record_failed",
                std::string("the record was not written; the business data is kept: ") + e.what());
        }
    }

    void count(outcome o) { telemetry_.on_decision({about_.entry, o, settings_.mode, settings_.profile}); }

    void log(log_level level, std::string_view name, const std::string& message) {
        const std::string hash = key_.key_hash();
        telemetry_.on_log({level, name, hash, message, about_});
    }

    record_store& store_;
    transactional_record_store* joined_;
    unit_of_work* tx_;
    telemetry_sink& telemetry_;
    const record_key& key_;
    std::string_view fingerprint_;
    const resolved_options& settings_;
    operation_info about_;  // what log events name the call by
    detail::erased_operation operation_;
    std::stop_token stop_;
    detail::owned_run* owned_;  // set when the one-statement form may run
};

std::set<std::string, std::less<>> names_of(const executor::store_map& stores) {
    std::set<std::string, std::less<>> names;
    for (const auto& [name, store] : stores) {
        if (!store) throw std::invalid_argument("idem: the store named '" + name + "' is null");
        names.insert(name);
    }
    return names;
}

}  // namespace

executor::executor(std::shared_ptr<record_store> store, executor_options options,
                   std::shared_ptr<telemetry_sink> telemetry)
    : executor(store_map{{"", std::move(store)}},
               std::make_shared<options_source>(std::move(options), std::set<std::string, std::less<>>{""}),
               std::move(telemetry)) {}

executor::executor(store_map stores, std::shared_ptr<options_source> options, std::shared_ptr<telemetry_sink> telemetry)
    : stores_(std::move(stores)),
      options_(std::move(options)),
      telemetry_(telemetry ? std::move(telemetry) : null_sink()) {
    if (!options_) throw std::invalid_argument("idem: the options source is null");
    options_->set_known_stores(names_of(stores_));
}

mode executor::resolve_mode(const execution_options& options) const {
    return options_->resolve(options).mode;
}

detail::verdict executor::run_erased(unit_of_work* tx, const record_key& key, std::string_view fingerprint,
                                     const execution_options& options, detail::erased_operation operation,
                                     std::stop_token stop, detail::owned_run* owned) {
    const resolved_options settings = options_->resolve(options);
    if (settings.mode == mode::off) {
        (void)operation.run(std::move(stop));
        return {execution_status::executed, execution_status::executed, mode::off};
    }
    detail::check_fingerprint(fingerprint);
    record_store& store = *stores_.find(settings.store)->second;  // resolve() checked the name
    if (settings.remember > duration::zero() && !store.traits().remembers)
        throw options_error({"profiles." + settings.profile + ".remember: the store '" + settings.store +
                             "' keeps no tombstones, so it cannot remember a key past its retention"});
    attempt a(store, tx, *telemetry_, key, fingerprint, settings, options, operation, std::move(stop), owned);
    return settings.mode == mode::enforce ? a.enforce() : a.observe();
}

void executor::settle(detail::owned_run& owned) const noexcept {
    if (!owned.pending) return;
    telemetry_->on_decision({owned.entry, *owned.pending, owned.mode, owned.profile});
    owned.pending.reset();
}

}  // namespace idem
