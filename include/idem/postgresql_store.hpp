// idem/postgresql_store.hpp: one key ledger for a fleet of instances, in your
// PostgreSQL transactions. idem::database opens it with a pool of business
// sessions on the same server:
//
//   idem::database db = idem::database::open("postgresql://app@db/bank");
//   db.migrate();
//   auto e = db.once(key, fingerprint, [&](idem::unit_of_work& uow) { return move_money(uow.sql()); });
//
// READ COMMITTED, the database's clock, poolers: docs/postgresql.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "idem/export.hpp"
#include "idem/store_admin.hpp"
#include "idem/transactional_record_store.hpp"

namespace idem {

struct IDEM_API postgresql_store_options {
    // A libpq connection string: "host=db dbname=bank user=app" or a
    // postgresql:// URI. Malformed: std::invalid_argument.
    std::string connection;
    std::size_t pool_size = 4;  // the detached view's connections, opened as needed
    bool migrate_on_open = true;
    // Set on the store's own connections (the detached view); zero leaves PostgreSQL's
    // setting, which is no limit. A detached reserve waits for a transaction that holds
    // the key. In Observe inside a transaction that wait can close a cycle PostgreSQL
    // cannot detect (your transaction holds a row another request's transaction waits
    // for, while your reservation waits for that request's record on a second
    // connection): lock_timeout ends it, and the reservation fails with a timeout
    // (Observe then runs the operation without a record).
    std::chrono::milliseconds lock_timeout = std::chrono::seconds(5);
    std::chrono::milliseconds statement_timeout{0};
    // A transaction on the store's own connections whose server has sent
    // nothing for this long has its connection ended (a stopped server, which
    // keepalives never find: docs/ha.md); zero waits for good.
    std::chrono::milliseconds answer_timeout = std::chrono::seconds(30);
    // Behind a pooler in transaction mode (PgBouncer pool_mode=transaction), where
    // each transaction may run on another server connection: statements go
    // unnamed (parsed each time, none outlives its transaction) and the store's
    // connections set no session parameter, so lock_timeout and statement_timeout
    // above are not applied: set them on the role (ALTER ROLE app SET lock_timeout = '5s').
    bool transaction_pooler = false;
};

// Opens `session` on `connection` (the format above): std::invalid_argument
// when the string is malformed, store_error when the server cannot be reached
// (connection_lost) or refuses the login (other).
IDEM_API void open_postgresql_session(soci::session& session, const std::string& connection);

class IDEM_API postgresql_store final : public transactional_record_store, public store_admin {
public:
    // Opens the first connection (and migrates, unless told not to):
    // options_error naming every bad option (std::invalid_argument
    // for a malformed connection string), store_error when the database fails.
    explicit postgresql_store(postgresql_store_options options);
    ~postgresql_store() override;
    postgresql_store(const postgresql_store&) = delete;
    postgresql_store& operator=(const postgresql_store&) = delete;

    // store_admin: migrations/postgresql, applied under an advisory lock, so
    // several processes may migrate at once.
    std::vector<std::string> migrate() override;
    using store_admin::inspect;  // by record_key, too
    [[nodiscard]] std::optional<record_state> inspect(std::span<const std::byte> digest, bool with_payload) override;
    [[nodiscard]] std::vector<listed_record> recent(std::string_view name_space, std::size_t limit) override;
    using store_admin::completed_since;  // of every scope, too
    [[nodiscard]] std::vector<listed_record> completed_since(std::string_view name_space,
                                                             const std::optional<scope>& owner, time_point since,
                                                             std::size_t limit) override;
    // One DELETE that re-checks the row's state under its lock: a record it would
    // delete that an open transaction holds locked is waited for (lock_timeout),
    // then judged as that transaction left it.
    [[nodiscard]] forget_result forget(std::span<const std::byte> digest, bool force) override;
    [[nodiscard]] std::size_t count_expired(duration older_than) override;
    // One statement: DELETE of rows picked FOR UPDATE SKIP LOCKED, so concurrent
    // purges never wait for each other and never delete a row twice.
    std::size_t purge_batch(std::size_t limit, duration older_than) override;
    rewrite_progress rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after, std::size_t limit,
                                      const payload_rewrite& rewrite) override;

    [[nodiscard]] store_traits traits() const noexcept override {
        store_traits t = transactional_record_store::traits();
        t.server_clock = true;
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
