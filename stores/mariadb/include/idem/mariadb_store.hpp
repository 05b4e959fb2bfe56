// idem/mariadb_store.hpp: the key ledger in your MariaDB (or MySQL) transactions,
// through SOCI's mysql backend. idem::database opens it with a pool of business
// sessions on the same server:
//
//   idem::database db = idem::database::open("mariadb://app:secret@db:3306/bank");
//   db.migrate();
//   auto e = db.once(key, fingerprint, [&](idem::unit_of_work& uow) { return move_money(uow.sql()); });
//
// URL forms, isolation, collation, errors and what differs on MySQL 8: docs/mariadb.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/store_admin.hpp"
#include "idem/transactional_record_store.hpp"

namespace soci {
class session;
}

namespace idem {

struct IDEM_API mariadb_store_options {
    // mariadb://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?unix_socket=PATH] (or
    // mysql://...); malformed: std::invalid_argument.
    std::string connection;
    std::size_t pool_size = 4;  // the detached view's connections, opened as needed
    bool migrate_on_open = true;
    // innodb_lock_wait_timeout on the store's own connections and the sessions
    // it opens (whole seconds, at least 1): how long a statement waits for a
    // row another transaction holds before error 1205, which reruns the unit of work.
    std::chrono::seconds lock_wait_timeout = std::chrono::seconds(5);
    // A transaction on the store's own connections whose server has sent
    // nothing for this long has its connection ended (a stopped server, which
    // keepalives never find: docs/ha.md); zero waits for good.
    std::chrono::milliseconds answer_timeout = std::chrono::seconds(30);
    // The clock leases and retentions are counted on (the records' times are
    // this process's, as on SQLite); tests pass a manual one.
    std::shared_ptr<const clock> time = clock::system();
};

// Opens `session` on `connection` (the URL above) as idem needs every session
// on its database: utf8mb4, strict SQL mode, READ COMMITTED as the session's
// level, the store's lock wait. std::invalid_argument when the URL is
// malformed, store_error when the server cannot be reached (connection_lost)
// or refuses the login (other).
IDEM_API void open_mariadb_session(soci::session& session, const std::string& connection,
                                   std::chrono::seconds lock_wait_timeout = std::chrono::seconds(5));

class IDEM_API mariadb_store final : public transactional_record_store, public store_admin {
public:
    // Opens the first connection (and migrates, unless told not to):
    // options_error naming every bad option, store_error when the database fails.
    explicit mariadb_store(mariadb_store_options options);
    ~mariadb_store() override;
    mariadb_store(const mariadb_store&) = delete;
    mariadb_store& operator=(const mariadb_store&) = delete;

    // store_admin: migrations/mariadb, each a step of its own (MariaDB commits
    // DDL as it runs) under a named lock, so several processes may migrate at once.
    std::vector<std::string> migrate() override;
    using store_admin::inspect;  // by record_key, too
    [[nodiscard]] std::optional<record_state> inspect(std::span<const std::byte> digest, bool with_payload) override;
    [[nodiscard]] std::vector<listed_record> recent(std::string_view name_space, std::size_t limit) override;
    using store_admin::completed_since;  // of every scope, too
    [[nodiscard]] std::vector<listed_record> completed_since(std::string_view name_space,
                                                             const std::optional<scope>& owner, time_point since,
                                                             std::size_t limit) override;
    [[nodiscard]] forget_result forget(std::span<const std::byte> digest, bool force) override;
    [[nodiscard]] std::size_t count_expired(duration older_than) override;
    // Rows picked FOR UPDATE SKIP LOCKED: concurrent purges never wait for each other.
    std::size_t purge_batch(std::size_t limit, duration older_than) override;
    rewrite_progress rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after, std::size_t limit,
                                      const payload_rewrite& rewrite) override;
    [[nodiscard]] store_traits traits() const noexcept override {
        store_traits t = transactional_record_store::traits();
        t.remembers = true;
        return t;
    }

protected:
    reservation do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) override;
    bool do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                     std::string_view payload, duration retention, duration remember) override;
    bool do_release(const record_key& key, std::string_view token) override;
    std::size_t do_purge_expired(std::size_t limit) override;
    reservation do_try_reserve_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                  duration lease) override;
    bool do_complete_in(unit_of_work& tx, const record_key& key, std::string_view token, std::string_view fingerprint,
                        std::string_view payload, duration retention, duration remember) override;
    bool do_release_in(unit_of_work& tx, const record_key& key, std::string_view token) override;
    record_lookup do_look_up_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint) override;
    void do_insert_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                      std::optional<std::string_view> payload, duration span, duration remember) override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace idem
