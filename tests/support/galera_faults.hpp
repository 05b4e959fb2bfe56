// The faults a service on a Galera cluster is put through, in turn, under load:
// one node killed (SIGKILL) and restarted, then two killed within a second, the
// survivor, left without quorum, bootstrapped as the primary component, and the
// two restarted. Each restarted node catches up by IST under the load.
//
//   idem::test::galera_cluster cluster;
//   idem::test::retrying_clients load(3, call);
//   auto figures = idem::test::through_galera_faults(cluster, load);
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "galera_cluster.hpp"
#include "retrying_clients.hpp"

namespace idem::test {

inline std::vector<fault_figures> through_galera_faults(galera_cluster& cluster, retrying_clients& load) {
    using namespace std::chrono_literals;
    using clock_type = retrying_clients::clock_type;
    std::vector<fault_figures> figures;
    const int last = cluster.size() - 1;
    // Galera's pause while the others drop a dead peer shows as the longest time without an answer.
    figures.push_back(load.through(
        "one node killed (SIGKILL)",
        [&] {
            cluster.kill(last);
            return clock_type::now();
        },
        8s));
    cluster.restart(last);
    figures.push_back(load.through(
        "two nodes killed within a second; the survivor, without quorum, bootstrapped",
        [&] {
            for (int node = 0; node < last; ++node) {
                cluster.kill(node);
                std::this_thread::sleep_for(300ms);
            }
            cluster.bootstrap(last);
            return clock_type::now();
        },
        8s));
    for (int node = 0; node < last; ++node) cluster.restart(node);
    return figures;
}

}  // namespace idem::test
