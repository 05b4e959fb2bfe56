// The transactions runners have open on the calling thread, innermost last.
//
// A SQLite database has one write lock, and an open runner transaction holds
// it (BEGIN IMMEDIATE): a second connection used by the same thread would wait
// for it until the busy timeout. The SQLite store's detached view looks here
// to join such a transaction (behind a savepoint) instead.
#pragma once

#include <span>

#include "idem/export.hpp"
#include "idem/unit_of_work.hpp"

namespace idem::detail {

[[nodiscard]] IDEM_API std::span<unit_of_work* const> open_transactions() noexcept;

}  // namespace idem::detail
