// A throwaway Redis Cluster for tests: 3 masters with a replica each, on free loopback ports.
//
//   redis_cluster cluster;                            // 6 redis-server, redis-cli --cluster create
//   idem::redis_options o; o.cluster = true; o.port = cluster.nodes()[0].port;
//   const auto shard = cluster.shard_of(slot);        // its master and replica
//   cluster.migrate_slot(slot, shard.master, other);  // SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE
//   cluster.fail_over(shard.replica);                 // CLUSTER FAILOVER, until the cluster agrees again
//
// Each node is a redis_server (unprivileged user, a folder of its own, stopped by a
// watchdog even when the test process is killed).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace idem::test {

class redis_cluster {
public:
    struct shard {
        int first_slot = 0;
        int last_slot = 0;
        redis_endpoint master;
        std::vector<redis_endpoint> replicas;
    };

    // Starts 2 x `masters` nodes in cluster mode, joins them with redis-cli --cluster create
    // --cluster-replicas 1, and waits until every node reports cluster_state:ok.
    explicit redis_cluster(int masters = 3);

    [[nodiscard]] std::vector<redis_endpoint> nodes() const;
    // The server behind nodes()[i].
    [[nodiscard]] redis_server& server(std::size_t i) { return *servers_.at(i); }
    // The slot ranges as `asked` sees them (CLUSTER SLOTS).
    [[nodiscard]] std::vector<shard> shards(const redis_endpoint& asked) const;
    [[nodiscard]] shard shard_of(int slot) const;
    [[nodiscard]] std::string node_id(const redis_endpoint& node) const;

    // Moves `slot` from one master to another as redis-cli --cluster reshard does, `batch`
    // keys per MIGRATE, calling `between_batches` after each (traffic meanwhile sees ASK).
    // Returns how many keys moved.
    int migrate_slot(int slot, const redis_endpoint& from, const redis_endpoint& to, int batch,
                     const std::function<void()>& between_batches);
    // CLUSTER FAILOVER on `replica`: its master hands over without losing a write.
    void fail_over(const redis_endpoint& replica);
    // Until every node says cluster_state:ok, all report the same masters for every slot,
    // and every master has a replica.
    void wait_until_settled(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;

private:
    std::vector<std::unique_ptr<redis_server>> servers_;
};

}  // namespace idem::test
