// What a store supplies to run the shared contract suite against it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "idem/record_store.hpp"

namespace idem::contract {

struct store_context {
    virtual ~store_context() = default;

    [[nodiscard]] virtual std::string name() const = 0;
    // A store to test. Scenarios use fresh namespaces, so contexts may share one database.
    [[nodiscard]] virtual std::shared_ptr<record_store> make_store() = 0;
    // Lets `by` pass: advances a manual clock, or sleeps on a real one.
    virtual void advance(duration by) = 0;
    // A lease or retention that `advance` can outlive quickly (short on real clocks).
    [[nodiscard]] virtual duration short_span() const { return std::chrono::seconds(30); }
    // Threads the concurrency scenario races and rounds it runs.
    [[nodiscard]] virtual int race_threads() const { return 64; }
    [[nodiscard]] virtual int race_rounds() const { return 200; }
};

// Defined once per store test binary.
store_context& context();

}  // namespace idem::contract
