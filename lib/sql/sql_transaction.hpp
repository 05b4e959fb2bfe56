// What a runner's transaction offers idem's SQL stores and the mapped objects
// beyond idem::unit_of_work, reached through unit_of_work::internals(): its
// dialect, state kept per connection (prepared statements), and the fast path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "idem/export.hpp"
#include "sql/fast_path.hpp"

namespace idem::detail {

class sql_dialect;

class IDEM_API sql_transaction : public fast_path {
public:
    [[nodiscard]] virtual const sql_dialect& dialect() const noexcept = 0;

    // A slot per owner (a store) that lives as long as this connection's
    // runner, for per-connection state such as prepared statements.
    [[nodiscard]] virtual std::shared_ptr<void>& connection_cache(std::uint64_t owner) = 0;

    // Whether a statement prepared on this connection may serve later
    // transactions: not behind a pooler in transaction mode, where the next one
    // may run on another server connection.
    [[nodiscard]] virtual bool keeps_statements() const noexcept = 0;

    // transaction_options::max_message_bytes of this runner.
    [[nodiscard]] virtual std::size_t max_message_bytes() const noexcept = 0;

protected:
    ~sql_transaction() = default;
};

// A process-wide unique owner id for connection_cache (one per store, say).
[[nodiscard]] IDEM_API std::uint64_t new_connection_cache_owner() noexcept;

}  // namespace idem::detail
