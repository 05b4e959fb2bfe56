// idem/executor.hpp: run an operation at most once per record key.
//
// The executor reserves the key, runs the operation, stores its result through
// the codec and replays it to every retry. Thread-safe; share one instance.
//
//   idem::executor exec{std::make_shared<idem::memory_store>()};
//   idem::record_key key{"payments.capture", idem::scope::tenant(tenant), request_key};
//   auto e = exec.execute(key, request_hash, {.profile = "payments"}, [&] { return capture(order); });
//   if (e.has_value()) respond(e.value());   // executed now, or replayed
//
// This is lease mode: the record lives beside the operation's effects. For work
// in a SQL transaction, idem::database::once() writes the record in that same
// transaction (idem/database.hpp).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/error.hpp"
#include "idem/execution.hpp"
#include "idem/export.hpp"
#include "idem/options.hpp"
#include "idem/record_store.hpp"
#include "idem/result_codec.hpp"
#include "idem/telemetry.hpp"
#include "idem/unit_of_work.hpp"

namespace idem {

namespace detail {

// A non-owning reference to a callable, for the non-template core of the executor.
template <class Signature>
class function_ref;

template <class R, class... Args>
class function_ref<R(Args...)> {
public:
    template <class F>
    function_ref(F& f) noexcept  // NOLINT: implicit by design, like std::function_ref
        : object_(std::addressof(f)), call_([](void* object, Args... args) -> R {
              return (*static_cast<F*>(object))(std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
    void* object_;
    R (*call_)(void*, Args...);
};

// The operation as the core sees it: bytes in, bytes out.
struct IDEM_API produced {
    std::string payload;
    classification kind;
};

struct IDEM_API erased_operation {
    function_ref<produced(std::stop_token)> run;
    function_ref<void(std::string_view)> replay;  // decodes a stored result
};

struct IDEM_API verdict {
    execution_status status;
    execution_status enforce_decision;
    idem::mode mode;
};

// A call in a transaction opened for it alone (execute_in_transaction,
// database::once): Enforce may look the key up, run the work and insert the
// record at the end, because the opener can roll the transaction back and run it
// again if a concurrent duplicate committed first. The decision of such a run is
// counted once the transaction has ended (executor_access::settle): a run whose
// insert lost the race is answered by the next one instead.
// What the opener lets the executor do in the transaction.
enum class owned_role {
    joins,    // the work joins a transaction already open: the usual path
    opens,    // the transaction was opened for this call alone: nothing else runs in it
    answers,  // as opens, but only a record may answer; the work does not run
};

// How far the executor got, for the opener to decide what a failure means.
enum class owned_progress {
    usual,       // answered from a record, or reserved first
    unreserved,  // the work started without a reservation
    inserted,    // it did, and its record was inserted (that fails at COMMIT when it lost)
    unanswered,  // `answers` found no record to answer with
};

struct IDEM_API owned_run {
    owned_role role = owned_role::joins;  // the opener sets it
    owned_progress progress = owned_progress::usual;
    std::optional<outcome> pending = {};
    entry_point entry = entry_point::executor;
    idem::mode mode = idem::mode::enforce;
    std::string profile = {};

    [[nodiscard]] bool started_unreserved() const noexcept {
        return progress == owned_progress::unreserved || progress == owned_progress::inserted;
    }
};

template <class Operation>
decltype(auto) invoke_operation(Operation& operation, std::stop_token stop) {
    if constexpr (std::is_invocable_v<Operation&, std::stop_token>)
        return operation(std::move(stop));
    else
        return operation();
}

struct executor_access;

// What an operation returns, called as the executor calls it.
template <class Operation>
using operation_result = decltype(invoke_operation(std::declval<Operation&>(), std::stop_token{}));

// Calls run(operation, codec) with R's default codec, and for void work an operation
// returning detail::unit, turning its execution<unit> into execution<void>.
template <class R, class Operation, class Run>
auto with_default_codec(Operation& operation, Run&& run) {
    if constexpr (std::is_void_v<R>) {
        auto returning_unit = [&](std::stop_token stop) {
            invoke_operation(operation, std::move(stop));
            return unit{};
        };
        const default_codec<unit> codec;
        auto e = run(returning_unit, codec);
        return execution<void>(e.status(), e.enforce_decision(), e.mode());
    } else {
        const default_codec<R> codec;
        return run(operation, codec);
    }
}

}  // namespace detail

class IDEM_API executor {
public:
    using store_map = std::map<std::string, std::shared_ptr<record_store>, std::less<>>;

    // One store; options validated now (options_error names every invalid field).
    explicit executor(std::shared_ptr<record_store> store, executor_options options = {},
                      std::shared_ptr<telemetry_sink> telemetry = nullptr);
    // Named stores ("" is the default) that profiles pick by name, and a shared options source.
    executor(store_map stores, std::shared_ptr<options_source> options,
             std::shared_ptr<telemetry_sink> telemetry = nullptr);

    // Runs `operation` (callable as T() or T(std::stop_token)) at most once per key.
    // A stop requested before it starts releases the key and throws operation_cancelled;
    // an exception it throws is rethrown and the key stays in flight until the lease ends.
    template <class T, class Operation>
    [[nodiscard]] execution<T> execute(const record_key& key, std::string_view fingerprint,
                                       const execution_options& options, Operation&& operation,
                                       const result_codec<T>& codec, std::stop_token stop = {}) {
        return run_typed(nullptr, key, fingerprint, options, operation, codec, std::move(stop));
    }

    // The same with the result type's default_codec: std::string, an integer, or void
    // (execution<void>: nothing stored, nothing replayed but the fact that it ran).
    template <class Operation>
    [[nodiscard]] auto execute(const record_key& key, std::string_view fingerprint, const execution_options& options,
                               Operation&& operation, std::stop_token stop = {}) {
        return detail::with_default_codec<detail::operation_result<Operation>>(
            operation, [&](auto& op, const auto& codec) {
                return run_typed(nullptr, key, fingerprint, options, op, codec, std::move(stop));
            });
    }

    // The mode a call would run in, so a caller can skip computing a fingerprint in off.
    [[nodiscard]] mode resolve_mode(const execution_options& options = {}) const;

    [[nodiscard]] options_source& options() const noexcept { return *options_; }
    [[nodiscard]] telemetry_sink& telemetry() const noexcept { return *telemetry_; }

private:
    friend struct detail::executor_access;

    template <class T, class Operation>
    execution<T> run_typed(unit_of_work* tx, const record_key& key, std::string_view fingerprint,
                           const execution_options& options, Operation& operation, const result_codec<T>& codec,
                           std::stop_token stop, detail::owned_run* owned = nullptr) {
        std::optional<T> value;
        auto run = [&](std::stop_token token) -> detail::produced {
            value.emplace(detail::invoke_operation(operation, std::move(token)));
            const classification kind = codec.classify(*value);
            if (kind == classification::release || kind == classification::keep_in_flight) return {{}, kind};
            return {codec.serialize(*value), kind};
        };
        auto replay = [&](std::string_view payload) { value.emplace(codec.deserialize(payload)); };
        const detail::verdict v = run_erased(tx, key, fingerprint, options, {run, replay}, std::move(stop), owned);
        return execution<T>(v.status, v.enforce_decision, v.mode, std::move(value));
    }

    detail::verdict run_erased(unit_of_work* tx, const record_key& key, std::string_view fingerprint,
                               const execution_options& options, detail::erased_operation operation,
                               std::stop_token stop, detail::owned_run* owned);
    // Counts the decision an owned run left pending.
    void settle(detail::owned_run& owned) const noexcept;

    store_map stores_;
    std::shared_ptr<options_source> options_;
    std::shared_ptr<telemetry_sink> telemetry_;
};

namespace detail {

// The executor inside an open unit of work, for idem's own layers (idem::database,
// the inbox inside a unit of work). With a transactional store in Enforce the
// reservation, the operation's writes and the record share the transaction: a
// rollback leaves no record. In Observe the reservation goes through the store's
// detached view and the result is written in `uow` behind a savepoint, so a failed
// record write never fails the business. A store that cannot join transactions
// works as outside one (its record is not rolled back).
struct executor_access {
    template <class T, class Operation>
    static execution<T> execute_in(executor& exec, unit_of_work& uow, const record_key& key,
                                   std::string_view fingerprint, const execution_options& options,
                                   Operation&& operation, const result_codec<T>& codec, std::stop_token stop = {},
                                   owned_run* owned = nullptr) {
        return exec.run_typed(&uow, key, fingerprint, options, operation, codec, std::move(stop), owned);
    }
    static void settle(executor& exec, owned_run& owned) noexcept { exec.settle(owned); }
    // The store calls resolved to `settings` use (the HTTP layer's reconciliation reads it).
    static record_store& store_of(const executor& exec, const resolved_options& settings) {
        const auto it = exec.stores_.find(settings.store);
        if (it == exec.stores_.end()) throw options_error({"store: no store named '" + settings.store + "'"});
        return *it->second;
    }
};

}  // namespace detail
}  // namespace idem
