// idem/execution.hpp: what an executed call answered.
//
//   auto e = exec.execute(key, fingerprint, {}, operation, codec);
//   switch (e.status()) {
//       case idem::execution_status::executed:   // ran now: e.value() is its result
//       case idem::execution_status::replayed:   return e.value();  // the first run's result
//       case idem::execution_status::in_flight:  return retry_later();
//       case idem::execution_status::key_reused: return reject();  // same key, other content
//       case idem::execution_status::expired:    return gone();    // ran long ago; its result is gone
//   }
#pragma once

#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "idem/export.hpp"
#include "idem/mode.hpp"

namespace idem {

// expired: the key ran before and its result is gone (retention over), but its
// profile's remembered window still holds (profile_options::remember): it did
// not run again.
enum class execution_status { executed, replayed, in_flight, key_reused, expired };

[[nodiscard]] IDEM_API std::string_view to_string(execution_status s) noexcept;

template <class T>
class execution {
public:
    execution(execution_status status, execution_status enforce_decision, idem::mode mode, std::optional<T> value)
        : status_(status), enforce_decision_(enforce_decision), mode_(mode), value_(std::move(value)) {}

    [[nodiscard]] execution_status status() const noexcept { return status_; }
    // What Enforce would have answered; in Observe the operation ran regardless.
    [[nodiscard]] execution_status enforce_decision() const noexcept { return enforce_decision_; }
    [[nodiscard]] idem::mode mode() const noexcept { return mode_; }

    // A result exists when the operation ran or a stored result was replayed.
    [[nodiscard]] bool has_value() const noexcept { return value_.has_value(); }
    [[nodiscard]] const T& value() const& { return (require_value(), *value_); }
    [[nodiscard]] T& value() & { return (require_value(), *value_); }
    [[nodiscard]] T&& value() && { return (require_value(), std::move(*value_)); }
    [[nodiscard]] const T* operator->() const { return &value(); }

private:
    void require_value() const {
        if (!value_) throw std::logic_error("idem: an execution that is in flight, key reused or expired has no value");
    }

    execution_status status_;
    execution_status enforce_decision_;
    idem::mode mode_;
    std::optional<T> value_;
};

// The answer for an operation that returns nothing: it ran now, or a retry was
// answered from its record (replayed), or it did not run (in flight, key reused,
// expired: it ran long ago).
template <>
class execution<void> {
public:
    execution(execution_status status, execution_status enforce_decision, idem::mode mode)
        : status_(status), enforce_decision_(enforce_decision), mode_(mode) {}

    [[nodiscard]] execution_status status() const noexcept { return status_; }
    [[nodiscard]] execution_status enforce_decision() const noexcept { return enforce_decision_; }
    [[nodiscard]] idem::mode mode() const noexcept { return mode_; }
    // The operation ran, now or before.
    [[nodiscard]] bool has_value() const noexcept {
        return status_ == execution_status::executed || status_ == execution_status::replayed;
    }

private:
    execution_status status_;
    execution_status enforce_decision_;
    idem::mode mode_;
};

}  // namespace idem
