// idem/sqlite_store.hpp: records in a SQLite database, in your transactions.
//
//   idem::sqlite_store store{{.path = "app.db"}};   // WAL, busy timeout, schema migrated
//   soci::session session;
//   idem::open_sqlite_session(session, "app.db");  // your connection, configured the same way
//   idem::transaction_runner runner{session};
//   runner.run([&](idem::unit_of_work& tx) {
//       auto r = store.try_reserve(tx, key, fingerprint, std::chrono::minutes(1));
//       if (r.status != idem::reservation_status::reserved) return;
//       tx.sql() << "UPDATE accounts SET balance = balance - 10 WHERE id = 'alice'";
//       (void)store.complete(tx, key, r.token, fingerprint, "receipt", std::chrono::hours(24));
//   });
//
// Writers, the detached view and the purge job: docs/sqlite.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/sqlite_options.hpp"
#include "idem/store_admin.hpp"
#include "idem/transactional_record_store.hpp"

namespace idem {

// Opens (creating it if missing, unless read_only) the database at `path` in
// `session` and configures it as below. store_error when it cannot be opened
// (store_failure::other, naming the directory, when that does not exist).
IDEM_API void open_sqlite_session(soci::session& session, const std::string& path,
                                  const sqlite_connection_options& options = {});
// Configures a connected sqlite3 session the way the store configures its own:
// WAL journal, the synchronous level, and the busy timeout; its writers then
// wait for the file in this process's line (docs/sqlite.md, "Writers wait in line").
IDEM_API void configure_sqlite_session(soci::session& session, const sqlite_connection_options& options = {});

struct IDEM_API sqlite_store_options {
    std::string path;  // the database file, created if missing (not ":memory:")
    sqlite_connection_options connection{};
    std::size_t pool_size = 4;    // the store's own connections, opened as needed
    bool migrate_on_open = true;  // not with connection.read_only
    // Expiry decisions; stored as integer milliseconds since the Unix epoch.
    std::shared_ptr<const clock> time = clock::system();
};

class IDEM_API sqlite_store final : public transactional_record_store, public store_admin {
public:
    // Opens the first connection (and migrates, unless told not to):
    // options_error naming every bad option, store_error when the database fails.
    explicit sqlite_store(sqlite_store_options options);
    ~sqlite_store() override;
    sqlite_store(const sqlite_store&) = delete;
    sqlite_store& operator=(const sqlite_store&) = delete;

    // Applies pending schema migrations (migrations/sqlite) and returns their
    // names; empty when the schema is current. Safe from several processes at once.
    std::vector<std::string> migrate() override;

    // store_admin on the store's clock, each call one short BEGIN IMMEDIATE
    // transaction (or, like the detached view, a savepoint in this thread's open
    // one). std::invalid_argument for a negative `older_than` or a zero `limit`.
    using store_admin::inspect;  // by record_key, too
    [[nodiscard]] std::optional<record_state> inspect(std::span<const std::byte> digest, bool with_payload) override;
    [[nodiscard]] std::vector<listed_record> recent(std::string_view name_space, std::size_t limit) override;
    using store_admin::completed_since;  // of every scope, too
    [[nodiscard]] std::vector<listed_record> completed_since(std::string_view name_space,
                                                             const std::optional<scope>& owner, time_point since,
                                                             std::size_t limit) override;
    [[nodiscard]] forget_result forget(std::span<const std::byte> digest, bool force) override;
    [[nodiscard]] std::size_t count_expired(duration older_than) override;
    std::size_t purge_batch(std::size_t limit, duration older_than) override;
    rewrite_progress rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after, std::size_t limit,
                                      const payload_rewrite& rewrite) override;

    [[nodiscard]] const std::string& path() const noexcept;

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
