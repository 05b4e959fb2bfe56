// The faults a service on a Galera cluster is put through, in turn, under load:
// one node killed (SIGKILL) and restarted, then two killed within a second, the
// survivor, left without quorum, bootstrapped as the primary component, and the
// two restarted. Each restarted node catches up by IST under the load.
//
//   idem::test::galera_cluster cluster;
//   idem::test::retrying_clients load(3, call);
//   auto figures = idem::test::through_galera_faults(cluster, load);
#pragma once

#include <atomic>
#include <chrono>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "galera_cluster.hpp"
#include "retrying_clients.hpp"

namespace idem::test {

// What the clients did while they used `used` of the nodes.
struct spread_figures {
    int nodes;
    double calls_per_second;  // distinct calls (the number in the key) answered, whoever answered first
    long long certification_failures;
};

// Sets `spread` (how many nodes the clients' calls go to) to `used`, lets a
// second pass, and counts four: the calls answered and the certification
// failures they cost.
inline spread_figures through_nodes(galera_cluster& cluster, retrying_clients& load, std::atomic<int>& spread,
                                    int used) {
    using namespace std::chrono_literals;
    const auto calls = [&] {
        std::set<int> numbers;
        for (const std::string& key : load.answered()) numbers.insert(retrying_clients::call_of(key).second);
        return numbers.size();
    };
    spread = used;
    std::this_thread::sleep_for(1s);
    const long long failures = cluster.certification_failures();
    const std::size_t before = calls();
    std::this_thread::sleep_for(4s);
    return {used, static_cast<double>(calls() - before) / 4.0, cluster.certification_failures() - failures};
}

inline std::string describe(const spread_figures& f) {
    std::ostringstream out;
    const double per_thousand =
        f.calls_per_second > 0 ? 1000.0 * static_cast<double>(f.certification_failures) / (f.calls_per_second * 4) : 0;
    out << "through " << f.nodes << " node(s): " << f.calls_per_second << " transfers/s, " << f.certification_failures
        << " certification failures (" << per_thousand << " per 1,000 transfers)";
    return out.str();
}

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
