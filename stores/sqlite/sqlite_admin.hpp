// The operator's statements on one SQLite connection (store_admin): look at a
// record, count expired rows. Prepared on a connection's first admin call only,
// so connections that never serve one pay nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

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
    // Rows with expires_at <= cutoff.
    [[nodiscard]] std::size_t count_expired(std::int64_t cutoff);

private:
    statement inspect_;
    statement count_;
};

}  // namespace idem::detail::sqlite
