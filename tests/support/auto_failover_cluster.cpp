#include "auto_failover_cluster.hpp"

#include <signal.h>

#include <fstream>
#include <stdexcept>
#include <thread>

#include "free_port.hpp"
#include "postgres_server.hpp"
#include "process_tree.hpp"

#ifndef IDEM_POSTGRES_BINDIR
#define IDEM_POSTGRES_BINDIR "/usr/lib/postgresql/15/bin"
#endif
#ifndef IDEM_PG_AUTOCTL
#define IDEM_PG_AUTOCTL "/usr/bin/pg_autoctl"
#endif

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using rows = std::vector<std::vector<std::string>>;

const std::string bindir = IDEM_POSTGRES_BINDIR;

// `check()`, false while it cannot connect (the server is starting or switching).
bool holds(const std::function<bool()>& check) {
    try {
        return check();
    } catch (const std::exception&) {
        return false;
    }
}

// Polls `done` every 100 ms (a failed query counts as not done) until `timeout`.
bool poll_until(const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (holds(done)) return true;
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(100ms);
    }
}

void append(const std::filesystem::path& file, const std::string& text) {
    std::ofstream out(file, std::ios::app);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + file.string());
}

// A cluster folder made by initdb, listening where the tests look. Data nodes
// run without fsync (tests need no durability; a killed process loses nothing
// the kernel holds), and checkpoint at once, so the base backup a rejoining
// node may need does not wait minutes for one. full_page_writes stays on:
// pg_rewind, which brings a demoted primary back, needs it.
void init_data(const throwaway_server& home, const std::string& pgdata, const std::string& sockets, bool data_node) {
    run_as_server_user(
        {bindir + "/initdb", "-D", pgdata, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "-U", "idem"},
        home.dir(), "initdb.log");
    append(std::filesystem::path(pgdata) / "postgresql.conf",
           "\nunix_socket_directories = '" + sockets + "'\nshared_buffers = 32MB\nmax_connections = 100\n" +
               (data_node ? "fsync = off\ncheckpoint_completion_target = 0\n" : ""));
}

}  // namespace

auto_failover_cluster::auto_failover_cluster()
    : sockets_("paf-sockets"), monitor_port_(free_loopback_port()), monitor_("paf-monitor") {
    const std::string monitor_data = (monitor_.dir() / "data").string();
    init_data(monitor_, monitor_data, sockets_.path().string(), false);
    auto argv = autoctl(monitor_);
    argv.insert(argv.end(), {"create", "monitor", "--pgdata", monitor_data, "--pgport", std::to_string(monitor_port_),
                             "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run"});
    monitor_.start(
        argv,
        [this] {
            return holds(
                [&] { return !sql_rows(monitor_conninfo(), "SELECT 1 FROM pgautofailover.formation").empty(); });
        },
        60s);
    // Health checks every second, a node unhealthy after 2 s without one, a
    // primary that cannot be reached given 3 s to step down: a failover takes
    // seconds, where the defaults take about half a minute.
    for (const char* setting : {"health_check_period = 1000", "health_check_timeout = 1000",
                                "health_check_max_retries = 1", "health_check_retry_delay = 500",
                                "node_considered_unhealthy_timeout = 2000", "primary_demote_timeout = 3000"})
        (void)sql_rows(monitor_conninfo(), std::string("ALTER SYSTEM SET pgautofailover.") + setting);
    (void)sql_rows(monitor_conninfo(), "SELECT pg_reload_conf()");

    for (int i = 0; i < 2; ++i) {
        auto& n = nodes_.emplace_back(
            data_node{free_loopback_port(), std::make_unique<throwaway_server>("paf-node" + std::to_string(i)), ""});
        n.pgdata = (n.server->dir() / "data").string();
        // The first node starts from a folder made here (where its socket goes);
        // the second is a base backup of the first, configuration and all.
        if (i == 0) init_data(*n.server, n.pgdata, sockets_.path().string(), true);
        auto create = autoctl(*n.server);
        create.insert(create.end(), {"create",
                                     "postgres",
                                     "--pgdata",
                                     n.pgdata,
                                     "--pgport",
                                     std::to_string(n.port),
                                     "--pghost",
                                     sockets_.path().string(),
                                     "--listen",
                                     "127.0.0.1",
                                     "--hostname",
                                     "127.0.0.1",
                                     "--name",
                                     "node" + std::to_string(i),
                                     "--username",
                                     "idem",
                                     "--dbname",
                                     "postgres",
                                     "--auth",
                                     "trust",
                                     "--no-ssl",
                                     "--monitor",
                                     "postgres://autoctl_node@127.0.0.1:" + std::to_string(monitor_port_) +
                                         "/pg_auto_failover?sslmode=disable",
                                     "--run"});
        start_node(i, create);
    }
    wait_stable();
}

auto_failover_cluster::~auto_failover_cluster() {
    for (auto& n : nodes_)
        if (n.server->running()) signal_tree(n.server->pid(), SIGKILL);
    if (monitor_.running()) signal_tree(monitor_.pid(), SIGKILL);
    // Each throwaway_server then reaps its pg_autoctl and removes its folder.
}

std::vector<std::string> auto_failover_cluster::autoctl(const throwaway_server& home) const {
    // pg_autoctl keeps its configuration and state under XDG folders, and runs
    // pg_ctl, pg_basebackup and pg_rewind from PATH.
    const std::string dir = home.dir().string();
    return {"env",
            "HOME=" + dir,
            "XDG_CONFIG_HOME=" + dir + "/config",
            "XDG_DATA_HOME=" + dir + "/share",
            "XDG_RUNTIME_DIR=" + dir + "/run",
            "PATH=" + bindir + ":/usr/bin:/bin",
            "PGUSER=idem",
            IDEM_PG_AUTOCTL};
}

void auto_failover_cluster::start_node(int index, std::vector<std::string> argv) {
    data_node& n = nodes_.at(static_cast<std::size_t>(index));
    const std::string port = std::to_string(n.port);
    // Ready once the monitor has it in the state it was assigned.
    n.server->start(
        argv,
        [this, port] {
            return holds([&] {
                return !sql_rows(
                            monitor_conninfo(),
                            "SELECT 1 FROM pgautofailover.node WHERE nodeport = " + port +
                                " AND reportedstate = goalstate AND goalstate IN ('single', 'primary', 'secondary')")
                            .empty();
            });
        },
        90s);
}

std::string auto_failover_cluster::monitor_conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(monitor_port_) + " user=idem dbname=pg_auto_failover";
}

std::string auto_failover_cluster::url() const {
    return "host=127.0.0.1,127.0.0.1 port=" + std::to_string(port(0)) + "," + std::to_string(port(1)) +
           " user=idem dbname=postgres target_session_attrs=read-write connect_timeout=2";
}

std::string auto_failover_cluster::conninfo(int node_index) const {
    return "host=127.0.0.1 port=" + std::to_string(port(node_index)) + " user=idem dbname=postgres connect_timeout=2";
}

int auto_failover_cluster::primary() const {
    const rows r = sql_rows(monitor_conninfo(),
                            "SELECT nodeport FROM pgautofailover.node WHERE reportedstate = goalstate AND "
                            "goalstate IN ('primary', 'wait_primary')");
    if (r.size() != 1) return -1;
    for (int i = 0; i < 2; ++i)
        if (std::to_string(port(i)) == r[0][0]) return i;
    return -1;
}

int auto_failover_cluster::wait_primary_other_than(int node_index, std::chrono::seconds timeout) {
    const int other = 1 - node_index;
    // Assigned primary (wait_primary while its standby is away counts: it takes writes).
    const bool promoted = poll_until(
        [&] {
            return !sql_rows(monitor_conninfo(),
                             "SELECT 1 FROM pgautofailover.node WHERE nodeport = " + std::to_string(port(other)) +
                                 " AND reportedstate IN ('wait_primary', 'primary')")
                        .empty() &&
                   sql_rows(conninfo(other), "SELECT pg_is_in_recovery()").at(0).at(0) == "f";
        },
        timeout);
    if (!promoted) throw std::runtime_error("no failover within the timeout:\n" + state());
    return other;
}

void auto_failover_cluster::wait_stable(std::chrono::seconds timeout) {
    const bool stable = poll_until(
        [&] {
            const rows r = sql_rows(monitor_conninfo(),
                                    "SELECT reportedstate FROM pgautofailover.node WHERE reportedstate = goalstate "
                                    "ORDER BY reportedstate");
            return r.size() == 2 && r[0][0] == "primary" && r[1][0] == "secondary";
        },
        timeout);
    if (!stable) throw std::runtime_error("the cluster did not settle:\n" + state());
}

std::string auto_failover_cluster::state() const {
    try {
        std::string out;
        for (const auto& row : sql_rows(monitor_conninfo(),
                                        "SELECT nodename, nodeport, reportedstate, goalstate, reportedtli, reportedlsn "
                                        "FROM pgautofailover.node ORDER BY nodeid"))
            out += row[0] + " :" + row[1] + " reported " + row[2] + ", assigned " + row[3] + ", timeline " + row[4] +
                   " at " + row[5] + "\n";
        return out;
    } catch (const std::exception& e) {
        return std::string("(the monitor did not answer: ") + e.what() + ")";
    }
}

std::string auto_failover_cluster::events() const {
    try {
        std::string out;
        for (const auto& row : sql_rows(monitor_conninfo(),
                                        "SELECT to_char(eventtime AT TIME ZONE 'UTC', 'HH24:MI:SS.MS'), nodename, "
                                        "reportedstate, goalstate, description FROM pgautofailover.event "
                                        "ORDER BY eventid"))
            out += row[0] + " " + row[1] + " reported " + row[2] + ", assigned " + row[3] + ": " + row[4] + "\n";
        return out;
    } catch (const std::exception& e) {
        return std::string("(the monitor did not answer: ") + e.what() + ")";
    }
}

int auto_failover_cluster::perform_failover() {
    const int from = primary();
    if (from < 0) throw std::logic_error("perform_failover: no primary now:\n" + state());
    // The monitor's function can deadlock with a keeper reporting at that moment; it is run again then.
    for (int attempt = 1;; ++attempt) {
        try {
            (void)sql_rows(monitor_conninfo(), "SELECT pgautofailover.perform_failover()");
            break;
        } catch (const std::runtime_error& e) {
            if (attempt == 5 || std::string(e.what()).find("deadlock detected") == std::string::npos) throw;
        }
    }
    return wait_primary_other_than(from);
}

int auto_failover_cluster::perform_drained_failover() {
    const int from = primary();
    if (from < 0) throw std::logic_error("perform_drained_failover: no primary now:\n" + state());
    const std::string old_primary = conninfo(from);
    // Every transaction that begins from now on is read-only: a write is refused
    // (25006), and clients go on to the new primary once it takes writes.
    (void)sql_rows(old_primary, "ALTER SYSTEM SET default_transaction_read_only = on");
    (void)sql_rows(old_primary, "SELECT pg_reload_conf()");
    // Those that began read-write before the reload end (commit, synchronously).
    const bool drained = poll_until(
        [&] {
            return sql_rows(old_primary,
                            "SELECT COUNT(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND "
                            "backend_xid IS NOT NULL AND pid <> pg_backend_pid()")
                       .at(0)
                       .at(0) == "0";
        },
        std::chrono::seconds(10));
    if (!drained) throw std::runtime_error("perform_drained_failover: writes still running on the old primary");
    return perform_failover();
}

void auto_failover_cluster::end_drain(int node) {
    const std::string old_primary = conninfo(node);
    (void)sql_rows(old_primary, "ALTER SYSTEM RESET default_transaction_read_only");
    (void)sql_rows(old_primary, "SELECT pg_reload_conf()");
}

void auto_failover_cluster::signal_node(int index, int sig) {
    data_node& n = nodes_.at(static_cast<std::size_t>(index));
    signal_tree(n.server->pid(), sig);
    if (sig == SIGKILL) n.server->stop(SIGKILL, 0ms);  // reaps its pg_autoctl
}

void auto_failover_cluster::rejoin(int index) {
    data_node& n = nodes_.at(static_cast<std::size_t>(index));
    auto run = autoctl(*n.server);
    run.insert(run.end(), {"run", "--pgdata", n.pgdata});
    start_node(index, run);
    wait_stable();
}

}  // namespace idem::test
