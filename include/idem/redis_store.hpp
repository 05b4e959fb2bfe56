// idem/redis_store.hpp: a record store on Redis, one key ledger shared by every instance.
//
// For side effects with no database transaction to join (a call to another
// service, a webhook, a message to publish). Each operation is one Lua script
// on one key (atomic, Redis Cluster safe); leases and retention are TTLs:
//
//   idem::redis_options options;
//   options.host = "redis.internal";
//   options.password = secret;
//   auto store = std::make_shared<idem::redis_store>(options);
//   auto r = store->try_reserve(key, fingerprint, std::chrono::minutes(2));
//
// Connections, outages, Sentinel and Cluster: docs/redis.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "idem/export.hpp"
#include "idem/record_store.hpp"
#include "idem/store_admin.hpp"

namespace idem {

namespace redis_detail {
class router;
}

// One node of a Redis Cluster: where a clustered store may ask for the slot map.
struct IDEM_API redis_node {
    std::string host;
    int port = 6379;
};

struct IDEM_API redis_options {
    std::string host = "127.0.0.1";
    int port = 6379;
    std::string unix_socket;  // a socket path: used instead of host and port
    std::string user;         // ACL user name (Redis 6 or later); empty: the default user
    std::string password;     // empty: no AUTH
    int database = 0;         // selected on every new connection
    // Zero means no limit. A command that times out drops its connection: its outcome is unknown.
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{2000};
    // Connections opened at most. Further callers wait for a free one, at most
    // connect_timeout + command_timeout (then store_error, timeout).
    std::size_t pool_size = 8;
    // Every Redis key is record_key::to_storage_key(key_prefix).
    std::string key_prefix{record_key::default_prefix};

    // Redis Cluster: host and port (then cluster_seeds, in turn) are only where the slot
    // map is asked for; each key goes to the master that owns its hash slot, with a pool
    // of pool_size connections per master. MOVED, ASK, TRYAGAIN and CLUSTERDOWN are
    // retried within command_timeout. Needs TCP (no unix_socket) and database 0.
    bool cluster = false;
    std::vector<redis_node> cluster_seeds;
};

class IDEM_API redis_store final : public record_store, public record_inspector {
public:
    // Checks the options (options_error naming each bad field); connects on first use.
    explicit redis_store(redis_options options = {});
    ~redis_store() override;
    redis_store(const redis_store&) = delete;
    redis_store& operator=(const redis_store&) = delete;

    // One round trip (PING): throws store_error when the server cannot be reached or
    // rejects the credentials. Useful at startup, to fail early on bad settings.
    // In a cluster: loads the slot map, then PINGs every master.
    void ping();

    [[nodiscard]] store_traits traits() const noexcept override;

    // record_inspector: `key`'s record, in one read-only script. Redis drops an
    // expired record itself (nullopt, never an expired one) and keeps no write
    // time (created_at is zero); `now` is this host's clock, expires_at now plus
    // the key's PTTL. A key holding something idem did not write: store_error
    // (corrupt_record).
    [[nodiscard]] std::optional<record_state> inspect(const record_key& key, bool with_payload) override;

    // Deletes `key`'s record by hand, by store_admin::forget's rule: a completed
    // entry goes; one in flight is kept and reported unless `force` (an expired
    // one is gone already: not_found; its tombstone, when the key is remembered,
    // goes: tombstone_deleted). One script: the look and the delete are one step.
    // Redis keeps no write time: the result's created_at is zero.
    [[nodiscard]] forget_result forget(const record_key& key, bool force);

protected:
    reservation do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) override;
    bool do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                     std::string_view payload, duration retention, duration remember) override;
    bool do_release(const record_key& key, std::string_view token) override;
    // Redis drops expired keys itself: nothing to do, returns 0.
    std::size_t do_purge_expired(std::size_t limit) override;

private:
    std::string prefix_;
    std::unique_ptr<redis_detail::router> router_;
};

}  // namespace idem
