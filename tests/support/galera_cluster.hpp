// A MariaDB Galera cluster on loopback: three mariadbd processes (Debian's
// mariadb-server-core with galera-4), each as server_user() in a folder of its
// own, every node taking writes. Replication is Galera's: a commit is certified
// by the whole primary component, and a conflicting one fails at COMMIT (1213).
//
//   idem::test::galera_cluster cluster;                 // three nodes, synced
//   auto db = idem::database::open(cluster.connection(0));
//   cluster.kill(2);                                     // SIGKILL: the host dies
//   cluster.restart(2);                                  // recovers its position, rejoins by IST
//   cluster.kill(0); cluster.kill(1);                   // the survivor loses quorum (1047 to writes)
//   cluster.bootstrap(2);                                // makes it the primary component again
//
// The nodes share one machine and need no full state transfer (SST), which
// would take Debian's mariadb-server package and its scripts: node 0 is
// installed once and its data copied to the others, and a node that comes back
// is given an incremental one (IST) from a peer's write-set cache, through a
// transfer script of the tests' own (tests/support/wsrep_sst_idem_ist).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mariadb_server.hpp"
#include "throwaway_server.hpp"

namespace idem::test {

class galera_cluster {
public:
    // `settings` for every node (innodb_flush_log_at_trx_commit, more arguments).
    explicit galera_cluster(int nodes = 3, mariadb_settings settings = {});
    galera_cluster(const galera_cluster&) = delete;
    galera_cluster& operator=(const galera_cluster&) = delete;

    [[nodiscard]] int size() const noexcept { return static_cast<int>(nodes_.size()); }
    // root on node `node`, database `idem`: mariadb://root@127.0.0.1:PORT/idem.
    [[nodiscard]] mariadb_address address(int node) const;
    [[nodiscard]] std::string connection(int node) const { return address(node).url(); }

    // SIGKILL to the node's mariadbd: it is down until restart().
    void kill(int node);
    // Starts a killed node again at the position it recovers from its own
    // storage; returns once it has caught up (Synced).
    void restart(int node);
    // Waits until the node has noticed it lost quorum, then makes its component
    // primary (pc.bootstrap).
    void bootstrap(int node);
    // wsrep_local_state_comment (Synced, Donor/Desynced, Joining, ...), or "down".
    [[nodiscard]] std::string state(int node) const;
    // A status counter (SHOW GLOBAL STATUS), e.g. wsrep_local_cert_failures; 0 for a node that is down.
    [[nodiscard]] long long status(int node, const std::string& name) const;
    // wsrep_local_cert_failures summed over the nodes (each counts from its last start).
    [[nodiscard]] long long certification_failures() const;

private:
    struct node_process {
        int port;
        int group_port;  // Galera's replication (gmcast)
        int ist_port;
        std::unique_ptr<throwaway_server> server;
    };
    [[nodiscard]] std::vector<std::string> command(int node, const std::string& peers) const;
    void start(int node, std::vector<std::string> argv);
    [[nodiscard]] std::string peers_of(int node) const;

    mariadb_settings settings_;
    std::vector<node_process> nodes_;
};

}  // namespace idem::test
