// idem/contract.hpp: run the record-store contract suite against your own store
// (library idem_contract, pkg-config `idem-contract`).
//
//   struct my_context final : idem::contract::store_context {
//       std::string name() const override { return "mine"; }
//       std::shared_ptr<idem::record_store> make_store() override { return std::make_shared<my_store>(); }
//   };
//   int main(int argc, char** argv) { my_context c; return idem::contract::run(c, argc, argv); }
//
// Which traits pick which scenarios: docs/custom-store.md.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "idem/record_store.hpp"
#include "idem/unit_of_work.hpp"

#define IDEM_CONTRACT_API [[gnu::visibility("default")]]

namespace idem::contract {

// What a store supplies. Scenarios use namespaces of their own, so every store a
// context makes may share one database.
class IDEM_CONTRACT_API store_context {
public:
    virtual ~store_context();

    [[nodiscard]] virtual std::string name() const = 0;
    // A store to test; called once per scenario.
    [[nodiscard]] virtual std::shared_ptr<record_store> make_store() = 0;

    // Lets `by` pass for the store. The default sleeps, which suits a store on a
    // server clock; a store on an injected clock (idem::manual_clock) advances it.
    virtual void advance(duration by);
    // A lease or retention that advance() outlives quickly: the default, 100 ms,
    // suits real time; a manual clock can afford minutes.
    [[nodiscard]] virtual duration short_span() const;
    // Threads the concurrency scenario races, and rounds it runs.
    [[nodiscard]] virtual int race_threads() const { return 64; }
    [[nodiscard]] virtual int race_rounds() const { return 200; }

    // For stores whose traits() say joins_transactions: runs `work` in a new
    // transaction on a connection the store can join, then commits it, or rolls it
    // back when `commit` is false. The default throws std::logic_error.
    virtual void run_in_transaction(const std::function<void(unit_of_work&)>& work, bool commit);
};

// Runs every scenario the store's traits call for against `context`'s stores,
// with doctest's command line (--test-case=..., --success, ...). Returns the exit
// code: 0 when every scenario passed.
IDEM_CONTRACT_API int run(store_context& context, int argc, char** argv);

}  // namespace idem::contract
