// What `idem inspect`, `idem complete` and `idem purge` share about operations
// in steps (idem/operation_state.hpp): reading them on a store's session, and
// how one is shown. Named, like records, by their hashes only.
#pragma once

#include <soci/soci.h>

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "idem/operation_state.hpp"
#include "idem/store_registry.hpp"
#include "idem/transaction_runner.hpp"
#include "record_report.hpp"
#include "sql/operations_table.hpp"
#include "sql/soci_errors.hpp"

namespace idem::cli {

// The record id (32 hex characters) of the operation a digest names.
[[nodiscard]] std::string operation_id(const digest& d);

// Runs work(session) in one transaction on a session of `store` (as the
// library does: behind a pooler in transaction mode a statement outside one
// may run on another server connection, and an operation and its steps are
// read as of one moment) when its schema has the operations' tables (the
// completer's migration), a driver's error as store_error; nothing when it
// has not.
template <class Work>
auto on_operations(const opened_store& store, Work&& work)
    -> std::optional<decltype(work(std::declval<soci::session&>()))> {
    using result = std::optional<decltype(work(std::declval<soci::session&>()))>;
    soci::session session;
    store.open_session(session);
    try {
        transaction_runner runner(session, {.isolation = isolation_level::read_committed});
        return runner.run([&](unit_of_work& uow) -> result {
            if (!detail::operations_table::exists(uow.sql())) return std::nullopt;
            return work(uow.sql());
        });
    } catch (const soci::soci_error&) {
        detail::rethrow_soci_as_store_error("reading operations", &session);
    }
}

// The operation `d` names, with its steps; nothing when there is none (or no table).
[[nodiscard]] std::optional<operation_state> read_operation(const opened_store& store, const digest& d);

// A stored result as an operator reads it: quoted text when it is printable
// ASCII (cut at 60 characters), else its size and first bytes in hex.
[[nodiscard]] std::string preview(std::string_view bytes);
// "running", "compensated", "running (lease ended 3s ago)".
[[nodiscard]] std::string phase_of(const operation_state& s);

// inspect's description of one operation: one "label: value" line each, then
// one line per stored step.
void print_operation(std::ostream& out, const operation_state& s);

}  // namespace idem::cli
