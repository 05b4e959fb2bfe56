// idem/operation.hpp: an operation in steps (idem/steps.hpp) that a completer
// (idem/completer.hpp) can finish when no request does. It is one function of
// its input, named by the namespace of its record keys: a request runs it with
// the input it brings, which is stored with the operation as it begins; the
// completer runs the same function on the stored input. It may declare a
// compensation, run instead once the completer failed compensate_after times.
//
//   idem::operation<std::string> payout{"payments.payout", [&](idem::steps& op) {
//       const payout_request p = parse(op.input());  // the same bytes on every run
//       op.step("hold", [&](idem::unit_of_work& uow) { return hold(uow, p); });
//       std::string sent = op.call("send", [&](const std::string& call_key) { return provider.pay(p, call_key); });
//       return op.step("settle", [&](idem::unit_of_work& uow) { return settle(uow, p, sent); });
//   }, {.compensate = [&](idem::steps& op) { return undo(op, parse(op.input())); }, .compensate_after = 3}};
//   auto e = payout.run(db, {"payments.payout", idem::scope::tenant("acme"), key}, fingerprint, body);
//
// See docs/steps.md.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "idem/database.hpp"
#include "idem/export.hpp"
#include "idem/record_key.hpp"
#include "idem/result_codec.hpp"
#include "idem/steps.hpp"

namespace idem {

// What a completer holds of an operation: its namespace, whether and when it
// compensates, and how to finish a run of it.
class IDEM_API any_operation {
public:
    virtual ~any_operation() = default;
    any_operation(const any_operation&) = delete;
    any_operation& operator=(const any_operation&) = delete;

    [[nodiscard]] const std::string& name_space() const noexcept { return name_space_; }
    [[nodiscard]] bool compensates() const noexcept { return policy_.compensates; }
    [[nodiscard]] int compensate_after() const noexcept { return policy_.compensate_after; }

protected:
    // std::invalid_argument for a namespace no record key can have, or a
    // compensate_after outside 0 to 1000.
    any_operation(std::string name_space, detail::completion_policy policy)
        : name_space_(std::move(name_space)), policy_(policy) {
        (void)record_key(name_space_, "probe");
        if (policy_.compensate_after < 0 || policy_.compensate_after > 1000)
            throw std::invalid_argument("idem: compensate_after must be between 0 and 1000");
    }

    // Runs the operation (its compensation when op.compensating()) on a run that
    // holds it, and stores what it returns as its final result.
    virtual void complete(steps& op) const = 0;
    static void finish(steps& op, const std::string& payload, classification how) { op.finish(payload, how); }

private:
    friend class completer;
    std::string name_space_;
    detail::completion_policy policy_;
};

template <class T>
struct operation_options {
    // Undoes what the operation did (releases a hold, cancels at the provider
    // with the call's key) when the completer failed to complete it
    // compensate_after times: its own steps follow the operation's, and what it
    // returns is the operation's final result (idem inspect: compensated).
    std::function<T(steps&)> compensate = nullptr;
    int compensate_after = 3;
    // How the final result is stored and replayed; null: default_codec<T>.
    std::shared_ptr<const result_codec<T>> codec = nullptr;
};

template <class T>
class operation final : public any_operation {
public:
    // std::invalid_argument for an empty `run`, a T without a default codec and
    // no codec given, and what any_operation refuses.
    operation(std::string name_space, std::function<T(steps&)> run, operation_options<T> options = {})
        : any_operation(std::move(name_space), {.compensates = static_cast<bool>(options.compensate),
                                                .compensate_after = options.compensate_after}),
          run_(std::move(run)),
          compensate_(std::move(options.compensate)),
          codec_(options.codec ? std::move(options.codec) : default_codec_of()) {
        if (!run_) throw std::invalid_argument("idem: an operation needs its code");
        if (!codec_) throw std::invalid_argument("idem: this operation's result type needs a codec (options.codec)");
    }

    // Runs it under `key` (of this operation's namespace) as database::steps
    // does, with `input` stored as it begins: a retry or the completer runs it
    // on that input (op.input()), whatever the retry brings. While the
    // completer compensates it, a request gets in_flight.
    execution<T> run(database& db, const record_key& key, std::string_view fingerprint, std::string_view input,
                     const execution_options& options = {}) const {
        if (key.name_space() != name_space())
            throw std::invalid_argument("idem: the key's namespace is not the operation's (" + name_space() + ")");
        return db.run_steps(key, fingerprint, std::string(input), compensates(), run_, *codec_, options);
    }

    [[nodiscard]] const result_codec<T>& codec() const noexcept { return *codec_; }

private:
    static std::shared_ptr<const result_codec<T>> default_codec_of() {
        if constexpr (has_default_codec<T>)
            return std::make_shared<const default_codec<T>>();
        else
            return nullptr;
    }

    void complete(steps& op) const override {
        if (op.compensating() && !compensate_)
            throw std::logic_error("idem: an operation of " + name_space() +
                                   " is to be compensated, and its namespace registers no compensation");
        T result = op.compensating() ? compensate_(op) : run_(op);
        finish(op, codec_->serialize(result), codec_->classify(result));
    }

    std::function<T(steps&)> run_;
    std::function<T(steps&)> compensate_;
    std::shared_ptr<const result_codec<T>> codec_;
};

}  // namespace idem
