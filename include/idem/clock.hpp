// idem/clock.hpp: the time source of stores that decide expiry themselves.
//
// Stores on a server clock (PostgreSQL, Redis) ignore it. Tests of your own
// code can drive a store through a manual clock instead of sleeping:
//
//   auto clock = std::make_shared<idem::manual_clock>();
//   idem::memory_store store{clock};
//   (void)store.try_reserve(key, "fp", std::chrono::seconds(30));
//   clock->advance(std::chrono::seconds(31));  // the lease has now expired
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "idem/export.hpp"

namespace idem {

using duration = std::chrono::nanoseconds;
using time_point = std::chrono::system_clock::time_point;

// The longest lease or retention idem accepts: 100 years. Longer ones are
// refused (options_error in options, std::invalid_argument from a store call),
// so an expiry time always stays far inside what a time_point can hold.
inline constexpr duration max_duration = std::chrono::duration_cast<duration>(std::chrono::years(100));

class IDEM_API clock {
public:
    virtual ~clock() = default;
    [[nodiscard]] virtual time_point now() const = 0;

    // The process-wide wall clock.
    [[nodiscard]] static std::shared_ptr<const clock> system();
};

// A clock that moves only when told to; thread-safe.
class IDEM_API manual_clock final : public clock {
public:
    explicit manual_clock(time_point start = time_point{std::chrono::hours(24 * 365 * 50)})
        : now_(start.time_since_epoch().count()) {}

    [[nodiscard]] time_point now() const override {
        return time_point{time_point::duration{now_.load(std::memory_order_acquire)}};
    }
    void advance(duration by) { now_.fetch_add(std::chrono::duration_cast<time_point::duration>(by).count()); }
    void set(time_point to) { now_.store(to.time_since_epoch().count(), std::memory_order_release); }

private:
    std::atomic<time_point::rep> now_;
};

}  // namespace idem
