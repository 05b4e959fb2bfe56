// The faults a service on a pg_auto_failover cluster is put through, in turn,
// under load: a planned failover, the primary's host killed (then rejoined as
// the standby), and the primary frozen past its health check (then resumed).
//
//   idem::test::retrying_clients load(4, call);
//   auto figures = idem::test::through_the_faults(cluster, load);
//   load.stop();
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "auto_failover_cluster.hpp"
#include "retrying_clients.hpp"

namespace idem::test {

// `host_killed` runs right after the primary's host is killed (a provider coming
// back, say). `drained`: the planned failover drains the primary of writes first.
inline std::vector<fault_figures> through_the_faults(auto_failover_cluster& cluster, retrying_clients& load,
                                                     const std::function<void()>& host_killed = {},
                                                     bool drained = false) {
    using namespace std::chrono_literals;
    using clock_type = retrying_clients::clock_type;
    std::vector<fault_figures> figures;
    const int planned = cluster.primary();
    figures.push_back(load.through(
        drained ? "planned failover, the primary drained first (read-only, then pgautofailover.perform_failover)"
                : "planned failover (pgautofailover.perform_failover)",
        [&] {
            (void)(drained ? cluster.perform_drained_failover() : cluster.perform_failover());
            return clock_type::now();
        },
        2s));
    cluster.wait_stable();  // the old primary follows the new one
    if (drained) cluster.end_drain(planned);
    const int killed = cluster.primary();
    if (killed < 0) throw std::runtime_error("no primary after the planned failover: " + cluster.state());
    figures.push_back(load.through(
        "the primary's host killed (SIGKILL to the node's whole process tree)",
        [&] {
            cluster.signal_node(killed, SIGKILL);
            if (host_killed) host_killed();
            (void)cluster.wait_primary_other_than(killed);
            return clock_type::now();
        },
        2s));
    cluster.rejoin(killed);  // under load: it comes back as the standby, replication synchronous again
    const int frozen = cluster.primary();
    if (frozen < 0) throw std::runtime_error("no primary after the rejoin: " + cluster.state());
    figures.push_back(load.through(
        "the primary frozen (SIGSTOP) past its health check, then resumed",
        [&] {
            cluster.signal_node(frozen, SIGSTOP);
            (void)cluster.wait_primary_other_than(frozen);
            const auto promoted = clock_type::now();
            std::this_thread::sleep_for(2s);
            cluster.signal_node(frozen, SIGCONT);
            return promoted;
        },
        2s));
    cluster.wait_stable();  // the resumed node learns it was demoted and follows the new primary
    return figures;
}

// Answered keys that the last primary lacks: acknowledged commits the cluster
// lost. pg_auto_failover (2.0, one standby) loses some in a planned failover
// under load: the standby, told to prepare its promotion, no longer counts as
// healthy, so the monitor moves the old primary from draining to wait_primary,
// which turns synchronous replication off while it still takes writes; the
// standby stops replicating and is promoted, and the old primary goes on
// acknowledging writes (asynchronously, to no one) until it is demoted, when
// they are gone. Those are told apart (answered from the planned failover until
// the next fault began, after the cluster settled) from losses anywhere else,
// which no fault here may cause.
struct lost_answers {
    std::set<std::string> in_planned_failover;
    std::set<std::string> elsewhere;
};

inline lost_answers lost_answers_of(const retrying_clients& load, const std::vector<fault_figures>& figures,
                                    const std::function<bool(const std::string&)>& present) {
    lost_answers lost;
    const auto from = figures.at(0).at, to = figures.at(1).at;
    for (const auto& [key, answered] : load.answers()) {
        if (present(key)) continue;
        (answered >= from && answered < to ? lost.in_planned_failover : lost.elsewhere).insert(key);
    }
    return lost;
}

}  // namespace idem::test
