// idem/steps.hpp: an operation in steps under one key. Each step is one
// transaction that also stores its result and moves the operation's recovery
// point on; each call runs outside any transaction with a call key that stays
// the same on every run (send it to the provider as its idempotency key). A
// rerun with the same key returns the stored results of completed steps in
// place, issues an interrupted call again with the same call key, and runs
// the rest.
//
//   auto e = db.steps(key, fingerprint, [&](idem::steps& op) {
//       long long hold = op.step("hold", [&](idem::unit_of_work& uow) { return hold_funds(uow, amount); });
//       std::string charge = op.call("charge", [&](const std::string& call_key) { return charge_card(call_key); });
//       return op.step("settle", [&](idem::unit_of_work& uow) { return settle(uow, hold, charge); });
//   });
//
// Step names and their order are the operation's shape: a rerun whose shape
// differs from the stored one gets steps_shape_changed. See docs/steps.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/error.hpp"
#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/result_codec.hpp"
#include "idem/unit_of_work.hpp"

namespace idem {

class database;

// A rerun met a stored step whose name or kind (step or call) differs from the
// one the code runs at that position, or the operation returned with a
// different number of steps than are stored. Nothing is written.
class IDEM_API steps_shape_changed : public error {
public:
    steps_shape_changed(std::size_t index, const std::string& message)
        : error(error_category::data, message), index_(index) {}
    // The position (from 0) where the stored shape and the code part.
    [[nodiscard]] std::size_t index() const noexcept { return index_; }

private:
    std::size_t index_;
};

// Another run took the operation over after this run's lease ended (its fencing
// token is newer): this run's step rolled back, and it may write nothing more.
class IDEM_API lease_lost : public transaction_error {
public:
    explicit lease_lost(const std::string& message) : transaction_error(message) {}
};

namespace detail {
struct steps_state;
// What the completer's takeover needs to know of a registered operation.
struct completion_policy {
    bool compensates = false;
    int compensate_after = 0;  // the completer's failed runs before it compensates
};
// What a completer's takeover did about compensation, for its log.
enum class takeover_note {
    none,
    compensation_begins,   // compensate_after runs failed: this run compensates
    compensation_resumes,  // marked to compensate before (an operator, or a run that failed): this run compensates
    no_compensation,       // marked to compensate, and the namespace has none: the mark is gone, it runs forward
};
}  // namespace detail

// One run of an operation in steps, handed to the operation by database::steps.
// Not shared across threads; it lives as long as that call.
class IDEM_API steps {
public:
    steps(steps&&) noexcept;
    steps& operator=(steps&&) noexcept;
    ~steps();

    // Runs work(unit_of_work&) in one transaction that also stores its result
    // and moves the recovery point past it, or returns the result stored by an
    // earlier run without running it. A throw rolls back this step only; a
    // transient conflict runs this step again (database_options::attempts).
    // The result type picks the codec, as for database::once.
    template <class Work>
    auto step(std::string_view name, Work&& work) {
        using result_type = std::invoke_result_t<Work&, unit_of_work&>;
        if constexpr (std::is_void_v<result_type>) {
            auto returning_unit = [&](unit_of_work& uow) { return (work(uow), detail::unit{}); };
            (void)step(name, returning_unit, default_codec<detail::unit>{});
        } else {
            return step(name, work, default_codec<result_type>{});
        }
    }

    template <class Work, class T>
    T step(std::string_view name, Work&& work, const result_codec<T>& codec) {
        std::optional<T> fresh;
        auto run = [&](unit_of_work& uow) {
            fresh.emplace(work(uow));
            return codec.serialize(*fresh);
        };
        std::optional<std::string> stored = run_step(name, run);
        return stored ? codec.deserialize(*stored) : std::move(*fresh);
    }

    // Runs call(call_key) outside any transaction, then stores what it returns
    // (a final answer, such as a declined charge, is returned, not thrown), or
    // returns the answer an earlier run stored without calling. A throw stores
    // nothing: the next run calls again with the same call key.
    template <class Call>
    auto call(std::string_view name, Call&& call) {
        using result_type = std::invoke_result_t<Call&, const std::string&>;
        return this->call(name, call, default_codec<result_type>{});
    }

    template <class Call, class T>
    T call(std::string_view name, Call&& call, const result_codec<T>& codec) {
        if (std::optional<std::string> stored = begin_call(name)) return codec.deserialize(*stored);
        T answer = call(std::as_const(call_key_));
        end_call(codec.serialize(answer));
        return answer;
    }

    // The call key of the call named `name` in this operation: the same on every
    // run, distinct for every record key and name, and a valid Idempotency-Key.
    [[nodiscard]] std::string call_key(std::string_view name) const;
    // The position after the last step stored when this run began (0 for a new operation).
    [[nodiscard]] std::size_t recovery_point() const noexcept;
    // This run's fencing token: every run that takes the operation over has a newer one.
    [[nodiscard]] std::int64_t fence() const noexcept;
    // The bytes the operation began with (idem::operation::run's input; empty for
    // database::steps), the same on every run, the completer's included: an
    // operation the completer can finish reads what it works on from here.
    [[nodiscard]] const std::string& input() const noexcept;
    // Whether this run undoes the operation rather than completing it: the
    // completer's, once compensation began (idem/operation.hpp).
    [[nodiscard]] bool compensating() const noexcept;
    // For a compensation: what the operation's own step or call `name` stored
    // (read with T's default codec), or nothing when the operation did not get
    // that far (or the call was made and never answered). What to undo.
    template <class T = std::string>
    [[nodiscard]] std::optional<T> stored(std::string_view name) const {
        std::optional<std::string> bytes = stored_bytes(name);
        if (!bytes) return std::nullopt;
        return default_codec<T>{}.deserialize(*bytes);
    }

private:
    friend class database;
    friend class any_operation;
    friend class completer;
    explicit steps(std::unique_ptr<detail::steps_state> state) noexcept;

    // The stored result of the next step, or nullopt after running `work` in a
    // transaction that stored what it returned.
    std::optional<std::string> run_step(std::string_view name, detail::function_ref<std::string(unit_of_work&)> work);
    // The stored answer of the next call, or nullopt when it is to be made
    // (call_key_ then holds its key, and the attempt is counted).
    std::optional<std::string> begin_call(std::string_view name);
    void end_call(const std::string& answer);
    [[nodiscard]] std::optional<std::string> stored_bytes(std::string_view name) const;

    // For database::steps: what the start decided (executed when this run holds
    // the operation), the stored final result of a replay, and the end of a run.
    [[nodiscard]] execution_status decision() const noexcept;
    [[nodiscard]] const std::string& stored_result() const noexcept;
    void finish(const std::string& payload, classification how);
    // Ends this run's lease after a throw, so a retry resumes at once: what is
    // stored is exactly what completed.
    void abandon() noexcept;
    // The completer's run failed: its lease ends after `wait`, `what` is kept
    // for operators (idem inspect), and, when `counted`, it is one more failed
    // run toward compensate_after.
    void fail(std::string_view what, std::chrono::milliseconds wait, bool counted) noexcept;
    // What the completer's takeover did about compensation (none for a request's run).
    [[nodiscard]] detail::takeover_note note() const noexcept;

    std::unique_ptr<detail::steps_state> state_;
    std::string call_key_;
};

}  // namespace idem
