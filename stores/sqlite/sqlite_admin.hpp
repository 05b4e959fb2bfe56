// The operator's statements on one SQLite connection (store_admin): look at a
// record or a namespace's latest, delete one, count expired rows. Prepared on a
// connection's first admin call only, so connections that never serve one pay
// nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "idem/store_admin.hpp"
#include "sql/record_id.hpp"
#include "sqlite_native.hpp"

namespace idem::detail::sqlite {

class admin_statements {
public:
    explicit admin_statements(database* db);

    [[nodiscard]] database* db() const noexcept { return inspect_.db(); }

    // The row of `id`, expired or not; `now` in milliseconds since the epoch.
    [[nodiscard]] std::optional<record_state> inspect(const record_id_type& id, bool with_payload, std::int64_t now);
    // The `limit` rows of `name_space` written last, newest first.
    [[nodiscard]] std::vector<listed_record> recent(std::string_view name_space, std::size_t limit, std::int64_t now);
    // The `limit` completed rows of `name_space` (and of the scope `owner`, when
    // set) written at or after `since` (milliseconds since the epoch), newest
    // first, found through the expires_at index.
    [[nodiscard]] std::vector<listed_record> completed_since(std::string_view name_space,
                                                             const std::optional<scope_id_type>& owner,
                                                             std::int64_t since, std::size_t limit, std::int64_t now);
    // Deletes the row of `id` unless it is in flight and `force` is not set; in
    // the caller's transaction, which holds the write lock, so nothing changes
    // between the look and the delete.
    [[nodiscard]] forget_result forget(const record_id_type& id, bool force, std::int64_t now);
    // Rows with expires_at <= cutoff, and tombstones with forget_at <= cutoff.
    [[nodiscard]] std::size_t count_expired(std::int64_t cutoff);
    // One batch of store_admin::rewrite_payloads, in the caller's transaction.
    [[nodiscard]] rewrite_progress rewrite_payloads(const std::optional<record_id_type>& after, std::size_t limit,
                                                    const payload_rewrite& rewrite);

private:
    [[nodiscard]] std::int64_t pragma_value(const char* pragma);
    void run_pragma(const char* pragma);

    // The rows `s` steps through, in recent()'s columns.
    [[nodiscard]] static std::vector<listed_record> listed(statement_use& s, std::string_view name_space,
                                                           std::int64_t now);

    statement inspect_;
    statement recent_;
    statement completed_since_;
    statement delete_;
    statement count_;
    statement delete_tombstone_;
    statement payloads_after_;
    statement rewrite_payload_;
};

}  // namespace idem::detail::sqlite
