// A PostgreSQL cluster managed by pg_auto_failover, on loopback: a monitor and
// two data nodes, each a `pg_autoctl` process (with the postgres it runs) as
// the unprivileged server user in a folder of its own. The monitor's health
// checks are shortened to about a second, so a failover takes seconds, not the
// default half minute. Replication is synchronous (pg_auto_failover's default
// with one standby that counts in the quorum).
//
//   idem::test::auto_failover_cluster cluster;      // node 0 primary, node 1 its standby
//   idem::database db = idem::database::open(cluster.url(), ...);
//   cluster.perform_failover();                      // planned: node 1 takes over
//   cluster.signal_node(cluster.primary(), SIGKILL); // the host dies; the monitor promotes the other
//   cluster.wait_primary_other_than(dead);
//   cluster.rejoin(dead);                            // pg_autoctl run again: it comes back as the standby
//
// Needs pg_autoctl (Debian's pg-auto-failover-cli and postgresql-15-auto-failover).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "temp_dir.hpp"
#include "throwaway_server.hpp"

namespace idem::test {

class auto_failover_cluster {
public:
    auto_failover_cluster();   // the monitor, then node 0, then node 1; returns when both report their goal
    ~auto_failover_cluster();  // kills every process tree outright (test servers need no clean stop)
    auto_failover_cluster(const auto_failover_cluster&) = delete;
    auto_failover_cluster& operator=(const auto_failover_cluster&) = delete;

    // Both nodes, the writable one chosen by libpq: what a service is given.
    // connect_timeout=2: a stopped server accepts TCP and never answers, and
    // libpq tries the hosts in order.
    [[nodiscard]] std::string url() const;
    // One node, by index.
    [[nodiscard]] std::string conninfo(int node_index) const;
    [[nodiscard]] int port(int node_index) const { return nodes_.at(static_cast<std::size_t>(node_index)).port; }

    // The node the monitor has as primary now (reported as assigned; wait_primary,
    // while its standby is away, counts: it takes writes), or -1.
    [[nodiscard]] int primary() const;
    // Waits until a node other than `node` is primary and takes writes; returns it.
    int wait_primary_other_than(int node_index, std::chrono::seconds timeout = std::chrono::seconds(90));
    // Waits until one node is primary and the other secondary, each as assigned.
    void wait_stable(std::chrono::seconds timeout = std::chrono::seconds(90));
    // The monitor's view, one line per node, for messages.
    [[nodiscard]] std::string state() const;
    // The monitor's event log, one line per event (UTC time, node, states, what happened), for messages.
    [[nodiscard]] std::string events() const;

    // A planned switch (pgautofailover.perform_failover()): returns once the other
    // node takes writes (wait_stable() for the old one to follow it).
    int perform_failover();
    // The same after draining the primary of writes: it is made read-only
    // (default_transaction_read_only) and its write transactions end first, so
    // it acknowledges none pg_auto_failover could lose on the way (docs/ha.md).
    // Returns once the other node takes writes.
    int perform_drained_failover();
    // Undoes the drain on the old primary (a standby now, once wait_stable()
    // returns), so that it takes writes when it is promoted again.
    void end_drain(int node);
    // `sig` to the node's pg_autoctl and everything under it (its postgres and
    // backends), frozen first: SIGKILL is the host dying, SIGSTOP it freezing.
    // After SIGKILL the node is down until rejoin().
    void signal_node(int node, int sig);
    // Starts a killed node's pg_autoctl again; returns once it is the standby.
    void rejoin(int node);

private:
    struct data_node {
        int port;
        std::unique_ptr<throwaway_server> server;
        std::string pgdata;
    };
    [[nodiscard]] std::vector<std::string> autoctl(const throwaway_server& home) const;
    [[nodiscard]] std::string monitor_conninfo() const;
    void start_node(int index, std::vector<std::string> argv);

    temp_dir sockets_;  // the unix sockets of all three servers (their configuration names it)
    int monitor_port_;
    throwaway_server monitor_;
    std::vector<data_node> nodes_;
};

}  // namespace idem::test
