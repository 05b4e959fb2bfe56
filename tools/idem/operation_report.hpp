// What `idem inspect` and `idem complete` share about operations in steps
// (idem/operation_state.hpp): reading one (idem/table_admin.hpp), and how one
// is shown. Named, like records, by their hashes only.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "idem/operation_state.hpp"
#include "idem/store_registry.hpp"
#include "record_report.hpp"

namespace idem::cli {

// The record id (32 hex characters) of the operation a digest names.
[[nodiscard]] std::string operation_id(const digest& d);

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
