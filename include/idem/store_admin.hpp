// idem/store_admin.hpp: the operator's view of a SQL record store: schema,
// purge job and a look at one record. The `idem` command drives it; a service
// can too (e.g. a purge thread):
//
//   idem::store_admin& admin = store;  // sqlite_store, postgresql_store
//   admin.migrate();
//   while (admin.purge_batch(1000, std::chrono::hours(1)) > 0) {}  // expired for over an hour
//   if (auto r = admin.inspect(key.digest(), false)) print(r->completed, r->expires_at);
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"

namespace idem {

struct IDEM_API record_state {
    bool completed = false;
    time_point created_at = {};  // when the current reservation (or completion) was written
    time_point expires_at = {};  // end of the lease (in flight) or of the retention (completed)
    time_point now = {};         // the store's clock when it was read (the server's, on PostgreSQL)
    // The operation the record is for, for operators; never used to find it.
    // Rows hold no scope or key text: keys often carry customer or order ids.
    std::string name_space = {};
    std::size_t payload_bytes = 0;
    std::optional<std::string> payload = {};  // only when asked for

    [[nodiscard]] bool expired() const noexcept { return expires_at <= now; }
};

class IDEM_API store_admin {
public:
    virtual ~store_admin() = default;

    // Applies pending migrations; returns their names (empty when none was pending).
    // Idempotent and safe to run from several processes at once.
    virtual std::vector<std::string> migrate() = 0;

    // The record whose digest (record_key::digest()) is `digest`, expired or
    // not. SQL stores key their rows by the digest's first 16 bytes, and find a
    // record by those alone too (the primary key as a table shows it);
    // std::invalid_argument for any other length.
    [[nodiscard]] virtual std::optional<record_state> inspect(std::span<const std::byte> digest, bool with_payload) = 0;

    // Rows expired at least `older_than` ago.
    [[nodiscard]] virtual std::size_t count_expired(duration older_than) = 0;

    // Deletes up to `limit` rows expired at least `older_than` ago, in one short
    // transaction; never a live row. Concurrent purges delete each row once.
    virtual std::size_t purge_batch(std::size_t limit, duration older_than) = 0;
};

}  // namespace idem
