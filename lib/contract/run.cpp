// idem::contract::run: doctest's runner over the contract scenarios, with the
// suites the store's traits rule out excluded. doctest's implementation lives in
// this library, hidden (symbol visibility), so a program that uses doctest for
// its own tests keeps its own.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "contract_context.hpp"
#include "idem/store_admin.hpp"

namespace idem::contract {
namespace {

store_context* running = nullptr;

// The scenario suites a store's traits leave out, with why.
std::vector<std::pair<const char*, const char*>> excluded_by(const store_traits& traits) {
    std::vector<std::pair<const char*, const char*>> out;
    if (!traits.atomic_reserve) out.emplace_back("atomic_reserve", "concurrent reserves may both win");
    if (!traits.joins_transactions) out.emplace_back("joins_transactions", "the store joins no transaction");
    if (traits.server_clock) out.emplace_back("local_clock", "expiry follows a server clock the context cannot move");
    if (!traits.remembers) out.emplace_back("remembers", "the store keeps no tombstones");
    return out;
}

}  // namespace

store_context& current() {
    if (running == nullptr) throw std::logic_error("idem: a contract scenario ran outside idem::contract::run");
    return *running;
}

store_context::~store_context() = default;

void store_context::advance(duration by) {
    std::this_thread::sleep_for(by);
}

duration store_context::short_span() const {
    return std::chrono::milliseconds(100);
}

void store_context::run_in_transaction(const std::function<void(unit_of_work&)>&, bool) {
    throw std::logic_error(
        "idem: the store joins transactions, but its contract context does not override "
        "run_in_transaction");
}

int run(store_context& context, int argc, char** argv) {
    const auto store = context.make_store();
    auto left_out = excluded_by(store->traits());
    if (dynamic_cast<const record_inspector*>(store.get()) == nullptr)
        left_out.emplace_back("inspect", "the store is no record_inspector");
    doctest::Context runner(argc, argv);
    std::string excluded;
    for (const auto& [suite, why] : left_out) {
        runner.addFilter("test-suite-exclude", suite);
        excluded += std::string("\n  ") + suite + ": " + why;
    }
    if (!excluded.empty())
        std::printf("idem contract, %s: scenarios left out%s\n", context.name().c_str(), excluded.c_str());
    running = &context;
    const int result = runner.run();
    running = nullptr;
    return result;
}

}  // namespace idem::contract
