// idem/table_admin.hpp: the operator's work on idem's tables beside the
// records of a SQL database: operations in steps (look at one, list the
// unfinished, release one, purge the finished) and the outbox (purge what was
// delivered). Each call is a transaction of its own, READ COMMITTED, on one
// session of the store it was given, in that store's SQL; a database whose
// migrations have not created a table reads as holding none of its rows.
// `idem inspect`, `idem complete` and `idem purge` are built on it; a service's
// own job can be too:
//
//   idem::opened_store s = idem::open_store(idem::database_url::parse("mariadb://ops@db1/bank"));
//   idem::table_admin tables(s);
//   for (const idem::operation_state& op : tables.unfinished_operations("payments.payout", 100)) alert(op);
//   if (tables.release_operation(key.digest(), false) == idem::release_outcome::released) log("handed over");
//   while (tables.purge_delivered_messages(1000, std::chrono::hours(24)) > 0) {}
//
// (idem/operations.hpp and idem/outbox_relay.hpp do the same through an
// idem::database.) Store errors are store_error, as every store's.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/operation_state.hpp"
#include "idem/store_registry.hpp"

namespace idem {

class IDEM_API table_admin {
public:
    // Works on a session of `store` (opened_store::open_session), opened here
    // and kept while this lives.
    explicit table_admin(const opened_store& store);
    table_admin(table_admin&&) noexcept;
    table_admin& operator=(table_admin&&) noexcept;
    ~table_admin();

    // Whether the database has the operations' tables (the completer's
    // migration), and the outbox's.
    [[nodiscard]] bool has_operations();
    [[nodiscard]] bool has_outbox();

    // The operation the digest (record_key::digest(), or its first 16 bytes)
    // names, with its steps and their results; nothing when there is none.
    // std::invalid_argument for any other length.
    [[nodiscard]] std::optional<operation_state> operation(std::span<const std::byte> digest);

    // Unfinished operations (running or compensating), without their steps, the
    // one whose lease ends (or ended) first first: of `name_space`, or of every
    // namespace when it is empty; at most `limit` (1 to 10,000, else
    // std::invalid_argument).
    [[nodiscard]] std::vector<operation_state> unfinished_operations(std::string_view name_space, std::size_t limit);

    // An operator's hand on one unfinished operation: its lease ends now and its
    // fencing token moves on, so the run holding it (if any) can write no step
    // more. With `compensate` it is also marked to compensate: its next run (the
    // completer's) undoes it.
    [[nodiscard]] release_outcome release_operation(std::span<const std::byte> digest, bool compensate);

    // Finished operations whose retention ended at least `older_than` ago: how
    // many (a plain read), and deleting up to `limit` of them with their steps,
    // oldest first. Never an unfinished one.
    [[nodiscard]] std::size_t count_expired_operations(duration older_than);
    std::size_t purge_operations(std::size_t limit, duration older_than);

    // Outbox messages delivered at least `older_than` ago: how many, and
    // deleting up to `limit` of them, oldest first. Never an undelivered one.
    [[nodiscard]] std::size_t count_delivered_messages(duration older_than);
    std::size_t purge_delivered_messages(std::size_t limit, duration older_than);

private:
    struct state;
    std::unique_ptr<state> state_;
};

}  // namespace idem
