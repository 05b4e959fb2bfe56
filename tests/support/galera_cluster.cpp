#include "galera_cluster.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "free_port.hpp"

#ifndef IDEM_GALERA_PROVIDER
#define IDEM_GALERA_PROVIDER "/usr/lib/galera/libgalera_smm.so"
#endif

namespace idem::test {
namespace {

using namespace std::chrono_literals;

// The state transfer mariadbd runs as `wsrep_sst_idem_ist` (found on its PATH)
// when a node joins behind the cluster. Only an incremental transfer (IST),
// which Galera itself streams from a peer's write-set cache, is supported: the
// donor is then only asked to pass its state ID to the joiner (--bypass), which
// here goes through a file, the nodes sharing one machine. A full transfer
// (SST) is refused with a message; the cluster above never needs one.
constexpr const char* transfer_script = R"(#!/bin/sh
role= address= datadir= gtid= domain=0 bypass=0 parent=
while [ $# -gt 0 ]; do
  case "$1" in
    --role) role=$2; shift ;;
    --address) address=$2; shift ;;
    --datadir) datadir=$2; shift ;;
    --gtid) gtid=$2; shift ;;
    --gtid-domain-id) domain=$2; shift ;;
    --parent) parent=$2; shift ;;
    --bypass) bypass=1 ;;
    --mysqld-args) break ;;
  esac
  shift
done
if [ "$role" = joiner ]; then
  state="${datadir%/}/idem_ist_state"
  rm -f "$state"
  echo "ready $state"
  waited=0
  while [ ! -s "$state" ]; do
    if [ -n "$parent" ] && ! kill -0 "$parent" 2>/dev/null; then exit 32; fi
    waited=$((waited + 1))
    if [ $waited -gt 1200 ]; then echo "wsrep_sst_idem_ist: no state from a donor in 120 s" >&2; exit 32; fi
    sleep 0.1
  done
  head -n1 "$state"
  rm -f "$state"
  exit 0
fi
if [ "$bypass" -ne 1 ]; then
  echo "wsrep_sst_idem_ist: a full state transfer (SST) was asked for; only incremental ones (IST) are supported" >&2
  exit 1
fi
echo "$gtid $domain" > "$address.tmp" && mv "$address.tmp" "$address" || exit 1
echo "done $gtid $domain"
)";

}  // namespace

galera_cluster::galera_cluster(int nodes, mariadb_settings settings) : settings_(std::move(settings)) {
    if (nodes < 1) throw std::invalid_argument("galera_cluster: at least one node");
    for (int i = 0; i < nodes; ++i) {
        nodes_.push_back({free_loopback_port(), free_loopback_port(), free_loopback_port(),
                          std::make_unique<throwaway_server>("galera" + std::to_string(i))});
        const auto script = nodes_.back().server->dir() / "wsrep_sst_idem_ist";
        std::ofstream(script) << transfer_script;
        std::filesystem::permissions(script, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                                 std::filesystem::perms::group_exec |
                                                 std::filesystem::perms::others_read |
                                                 std::filesystem::perms::others_exec);
    }
    // Node 0 founds the cluster, makes the database and stops cleanly: its saved
    // state (grastate.dat) then names the cluster and the last write, and copies
    // of its folder join at that state.
    const std::filesystem::path first = nodes_[0].server->dir();
    install_mariadb(first);
    std::vector<std::string> founding = command(0, "");
    founding.emplace_back("--wsrep-new-cluster");
    start(0, founding);
    (void)mariadb_rows(address(0).with_database(""), "CREATE DATABASE idem");
    nodes_[0].server->stop(SIGTERM, 30s);
    for (int i = 1; i < nodes; ++i) {
        const std::filesystem::path dir = nodes_[static_cast<std::size_t>(i)].server->dir();
        run_as_server_user({"cp", "-a", (first / "data").string(), (dir / "data").string()}, dir, "copy.log");
    }
    start(0, founding);
    for (int i = 1; i < nodes; ++i) start(i, command(i, peers_of(i)));
}

mariadb_address galera_cluster::address(int node) const {
    mariadb_address a;
    a.port = nodes_.at(static_cast<std::size_t>(node)).port;
    a.database = "idem";
    return a;
}

std::string galera_cluster::peers_of(int node) const {
    std::string peers;
    for (int i = 0; i < size(); ++i) {
        if (i == node) continue;
        if (!peers.empty()) peers += ",";
        peers += "127.0.0.1:" + std::to_string(nodes_[static_cast<std::size_t>(i)].group_port);
    }
    return peers;
}

std::vector<std::string> galera_cluster::command(int node, const std::string& peers) const {
    const node_process& n = nodes_.at(static_cast<std::size_t>(node));
    std::vector<std::string> argv{"/usr/bin/env", "PATH=" + n.server->dir().string() + ":/usr/bin:/bin"};
    for (std::string& arg : mariadbd_command(n.server->dir(), n.port, settings_)) argv.push_back(std::move(arg));
    const std::string group = "127.0.0.1:" + std::to_string(n.group_port);
    for (std::string arg : std::initializer_list<std::string>{
             "--wsrep-on=ON",
             "--wsrep-provider=" IDEM_GALERA_PROVIDER,
             "--wsrep-cluster-name=idem-test",
             "--wsrep-node-name=node" + std::to_string(node),
             "--wsrep-node-address=" + group,
             "--wsrep-cluster-address=gcomm://" + peers,
             // A write-set cache large enough that a node killed during a test
             // catches up from it (IST) when it comes back; a peer that stops
             // answering is suspected after 2 s and dropped after 4 (5 and 15 by default).
             "--wsrep-provider-options=gmcast.listen_addr=tcp://" + group +
                 ";ist.recv_addr=127.0.0.1:" + std::to_string(n.ist_port) +
                 ";gcache.size=64M;evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S;"
                 "evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S",
             "--wsrep-sst-method=idem_ist",
             // What Galera requires.
             "--binlog-format=ROW",
             "--innodb-autoinc-lock-mode=2",
         })
        argv.push_back(std::move(arg));
    return argv;
}

void galera_cluster::start(int node, std::vector<std::string> argv) {
    nodes_.at(static_cast<std::size_t>(node))
        .server->start(
            std::move(argv), [this, node] { return state(node) == "Synced"; }, 90s);
}

void galera_cluster::kill(int node) {
    nodes_.at(static_cast<std::size_t>(node)).server->stop(SIGKILL);
}

void galera_cluster::restart(int node) {
    const node_process& n = nodes_.at(static_cast<std::size_t>(node));
    const std::filesystem::path dir = n.server->dir();
    // A killed node's saved state says "unknown" (seqno -1); InnoDB knows the
    // last write it committed: --wsrep-recover reads it, as a service
    // manager's galera_recovery does, and the node starts from there.
    run_as_server_user(
        {IDEM_MARIADBD, "--no-defaults", "--datadir=" + (dir / "data").string(), "--tmpdir=" + dir.string(),
         "--skip-log-bin", "--innodb-buffer-pool-size=32M", "--innodb-use-native-aio=0", "--wsrep-on=ON",
         "--wsrep-provider=" IDEM_GALERA_PROVIDER, "--binlog-format=ROW", "--wsrep-sst-method=idem_ist",
         "--wsrep-cluster-address=gcomm://" + peers_of(node), "--skip-networking",
         "--socket=" + (dir / "recover.sock").string(), "--wsrep-recover", "--disable-log-error"},
        dir, "recover.log");
    std::ifstream log(dir / "recover.log");
    std::string line, position;
    const std::string marker = "WSREP: Recovered position: ";
    while (std::getline(log, line))
        if (const auto at = line.find(marker); at != std::string::npos) position = line.substr(at + marker.size());
    if (position.empty()) throw std::runtime_error("galera node " + std::to_string(node) + ": no recovered position");
    std::vector<std::string> argv = command(node, peers_of(node));
    argv.push_back("--wsrep-start-position=" + position);
    start(node, std::move(argv));
}

void galera_cluster::bootstrap(int node) {
    const auto wait_for = [&](const char* wanted, const char* what) {
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        while (state(node) != wanted) {
            if (std::chrono::steady_clock::now() > deadline)
                throw std::runtime_error("galera node " + std::to_string(node) + " " + what + ": " + state(node));
            std::this_thread::sleep_for(50ms);
        }
    };
    // Until the node has noticed its peers are gone, it holds itself primary
    // and a bootstrap would do nothing.
    wait_for("non-primary", "did not notice it lost quorum");
    (void)mariadb_rows(address(node), "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'");
    wait_for("Synced", "did not become primary");
}

std::string galera_cluster::state(int node) const {
    const node_process& n = nodes_.at(static_cast<std::size_t>(node));
    if (!n.server->running() || !mariadb_answers(address(node).with_database(""))) return "down";
    try {
        const auto rows = mariadb_rows(address(node).with_database(""),
                                       "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                                       "WHERE VARIABLE_NAME IN ('WSREP_CLUSTER_STATUS', 'WSREP_LOCAL_STATE_COMMENT') "
                                       "ORDER BY VARIABLE_NAME");
        // A node outside the primary component can say Synced of itself.
        if (rows.size() == 2 && rows[0].at(1) != "Primary") return "non-primary";
        return rows.size() == 2 ? rows[1].at(1) : "unknown";
    } catch (const std::exception&) {
        return "down";
    }
}

long long galera_cluster::status(int node, const std::string& name) const {
    try {
        const auto rows = mariadb_rows(address(node).with_database(""), "SHOW GLOBAL STATUS LIKE '" + name + "'");
        return rows.empty() ? 0 : std::stoll(rows[0].at(1));
    } catch (const std::exception&) {
        return 0;
    }
}

long long galera_cluster::certification_failures() const {
    long long n = 0;
    for (int i = 0; i < size(); ++i) n += status(i, "wsrep_local_cert_failures");
    return n;
}

}  // namespace idem::test
