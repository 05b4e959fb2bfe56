// The throwaway MariaDB server the MariaDB tests start (tests/support/mariadb_server.hpp),
// reached through SOCI's mysql backend as idem's MariaDB store reaches it: it
// keeps the defaults MariaDB ships, makes and drops scratch databases, keeps
// its data across a restart and a kill, a stopped server makes SOCI throw
// rather than hang, and a killed test process leaves nothing behind.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <signal.h>
#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "child_process.hpp"
#include "mariadb_server.hpp"

namespace {

using namespace std::chrono_literals;
using idem::test::mariadb_address;
using idem::test::mariadb_server;

std::string text_of(soci::session& s, const std::string& sql) {
    std::string value;
    s << sql, soci::into(value);
    return value;
}

int count_of(soci::session& s, const std::string& sql) {
    int value = -1;
    s << sql, soci::into(value);
    return value;
}

// The MySQL client error a SOCI call ended with; 0 when it threw none, -1 for another exception.
template <typename F>
long long client_error_of(F&& call) {
    try {
        call();
        return 0;
    } catch (const soci::mysql_soci_error& e) {
        return e.err_num_;
    } catch (const std::exception&) {
        return -1;
    }
}

bool lost_connection(long long error) {
    return error == 2006 || error == 2013;  // CR_SERVER_GONE_ERROR, CR_SERVER_LOST
}

// kill() returns before every thread of the process has stopped: a statement
// sent right after SIGSTOP may still be answered.
bool all_threads_stopped(pid_t pid) {
    const auto tasks = std::filesystem::path("/proc") / std::to_string(pid) / "task";
    for (const auto& task : std::filesystem::directory_iterator(tasks)) {
        std::ifstream stat(task.path() / "stat");
        std::string line;
        std::getline(stat, line);
        // pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'.
        const auto close = line.rfind(')');
        if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') return false;
    }
    return true;
}

}  // namespace

TEST_CASE("addresses: a mariadb:// or mysql:// URL, and the same for SOCI's mysql backend") {
    const auto a = mariadb_address::parse(
        "mysql://app%40shop:p%3Aw%20d@db.example:3307/orders?charset=utf8mb4&unix_socket=/run/mysqld/x.sock");
    CHECK(a.user == "app@shop");
    CHECK(a.password == "p:w d");
    CHECK(a.host == "db.example");
    CHECK(a.port == 3307);
    CHECK(a.database == "orders");
    REQUIRE(a.options.size() == 2);
    CHECK(a.options[1] == std::pair<std::string, std::string>{"unix_socket", "/run/mysqld/x.sock"});
    CHECK(a.url() ==
          "mariadb://app%40shop:p%3Aw%20d@db.example:3307/orders?charset=utf8mb4&unix_socket=/run/mysqld/x.sock");
    CHECK(a.soci() ==
          "host=db.example port=3307 user=app@shop password='p:w d' db=orders charset=utf8mb4 "
          "unix_socket=/run/mysqld/x.sock");

    const auto local = mariadb_address::parse("mariadb://root@127.0.0.1:41234/idem");
    CHECK(local.url() == "mariadb://root@127.0.0.1:41234/idem");
    CHECK(local.soci() == "host=127.0.0.1 port=41234 user=root db=idem");
    CHECK(local.with_port(5000).with_database("other").soci() == "host=127.0.0.1 port=5000 user=root db=other");
    CHECK(mariadb_address::parse("mariadb://root@[::1]/x").host == "::1");
    CHECK(mariadb_address::parse("mariadb://root@[::1]/x").port == 3306);
    CHECK(mariadb_address::parse("mariadb://root@[::1]:3307/x").url() == "mariadb://root@[::1]:3307/x");
    CHECK(mariadb_address::parse("mariadb://root@host").database.empty());

    CHECK_THROWS_AS((void)mariadb_address::parse("postgresql://root@host/db"), std::invalid_argument);
    CHECK_THROWS_AS((void)mariadb_address::parse("mariadb://root@host:port/db"), std::invalid_argument);
    CHECK_THROWS_AS((void)mariadb_address::parse("mariadb://root@host:70000/db"), std::invalid_argument);
    CHECK_THROWS_AS((void)mariadb_address::parse("mariadb://root@host:99999999999/db"), std::invalid_argument);
    CHECK_THROWS_AS((void)mariadb_address::parse("mariadb://ro%4@host/db"), std::invalid_argument);
}

TEST_CASE("a throwaway server: MariaDB 10.11 as it ships, reached over TCP and its socket, scratch databases") {
    mariadb_server server;
    CHECK(server.connection() == "mariadb://root@127.0.0.1:" + std::to_string(server.port()) + "/idem");
    CHECK(server.soci_connection() == "host=127.0.0.1 port=" + std::to_string(server.port()) + " user=root db=idem");
    soci::session s(soci::mysql, server.soci_connection());

    CHECK(text_of(s, "SELECT VERSION()").starts_with("10.11."));
    CHECK(text_of(s, "SELECT DATABASE()") == "idem");
    // The defaults idem must cope with, not hidden by the test server.
    CHECK(text_of(s, "SELECT @@character_set_server") == "latin1");
    CHECK(text_of(s, "SELECT @@collation_server") == "latin1_swedish_ci");
    CHECK(text_of(s, "SELECT @@tx_isolation") == "REPEATABLE-READ");
    // What it changes.
    CHECK(count_of(s, "SELECT @@innodb_flush_log_at_trx_commit") == 2);
    CHECK(count_of(s, "SELECT @@log_bin") == 0);
    CHECK(count_of(s, "SELECT @@max_connections") == 400);

    soci::session over_socket(soci::mysql, server.soci_socket_connection());
    CHECK(text_of(over_socket, "SELECT @@socket") == server.unix_socket().string());
    CHECK(count_of(over_socket, "SELECT 1") == 1);

    std::optional<idem::test::mariadb_scratch_database> scratch;
    scratch.emplace(server.connection(), "server");
    const std::string name = scratch->name();
    CHECK(name.starts_with("idem_server_"));
    CHECK(scratch->connection() == server.connection(name));
    const std::string exists = "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '" + name + "'";
    CHECK(count_of(s, exists) == 1);
    // Created with the server's default character set: the store must ask for its own.
    CHECK(text_of(s, "SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '" + name +
                         "'") == "latin1");

    // A connection in the middle of a transaction on one of its tables would
    // hold DROP DATABASE up for a day: the scratch database ends it instead.
    soci::session user(soci::mysql, scratch->soci_connection());
    user << "CREATE TABLE t (k INT PRIMARY KEY) ENGINE=InnoDB";
    user.begin();
    user << "INSERT INTO t VALUES (1)";
    const auto before = std::chrono::steady_clock::now();
    scratch.reset();
    CHECK(std::chrono::steady_clock::now() - before < 5s);
    CHECK(count_of(s, exists) == 0);
    CHECK(lost_connection(client_error_of([&] { user.commit(); })));
}

TEST_CASE("a restart keeps the data, and so does a killed server (SIGKILL)") {
    mariadb_server server;
    {
        soci::session s(soci::mysql, server.soci_connection());
        s << "CREATE TABLE kept (k INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB";
        s << "INSERT INTO kept VALUES (1, 'before restart')";
    }
    server.restart();
    {
        soci::session s(soci::mysql, server.soci_connection());
        CHECK(text_of(s, "SELECT v FROM kept WHERE k = 1") == "before restart");
        s << "INSERT INTO kept VALUES (2, 'before kill')";
    }
    // flush_log_at_trx_commit = 2 writes each commit to the OS: a killed server loses none.
    server.process().stop(SIGKILL);
    server.start();
    soci::session s(soci::mysql, server.soci_connection());
    CHECK(text_of(s, "SELECT v FROM kept WHERE k = 2") == "before kill");
}

TEST_CASE("a server that stops under a connection: SOCI throws, it does not hang") {
    mariadb_server server;
    soci::session idle(soci::mysql, server.soci_connection());
    soci::session busy(soci::mysql, server.soci_connection());
    // read_timeout: what keeps a client from waiting forever on a paused server.
    soci::session bounded(soci::mysql, server.soci_connection() + " read_timeout=1");
    CHECK(count_of(idle, "SELECT 1") == 1);

    // A paused server (SIGSTOP) answers nothing; the read timeout ends the wait.
    server.process().signal(SIGSTOP);
    const auto stopping = std::chrono::steady_clock::now() + 10s;
    while (!all_threads_stopped(server.process().pid()) && std::chrono::steady_clock::now() < stopping)
        std::this_thread::sleep_for(1ms);
    auto started = std::chrono::steady_clock::now();
    CHECK(client_error_of([&] { (void)count_of(bounded, "SELECT 1"); }) != 0);
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    server.process().signal(SIGCONT);

    // A query in flight when the server shuts down ends with an error at once.
    auto in_flight = std::async(std::launch::async,
                                [&] { return client_error_of([&] { (void)count_of(busy, "SELECT SLEEP(30)"); }); });
    soci::session watcher(soci::mysql, server.soci_connection());
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (count_of(watcher, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP%'") ==
               0 &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    started = std::chrono::steady_clock::now();
    server.stop();
    REQUIRE(in_flight.wait_for(10s) == std::future_status::ready);
    CHECK(lost_connection(in_flight.get()));
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    // A connection idle when it stopped finds out at its next statement.
    CHECK(lost_connection(client_error_of([&] { (void)count_of(idle, "SELECT 1"); })));
    // And a new one is refused, at once (libmariadb says 2002 over TCP too, libmysqlclient 2003).
    const auto refused = client_error_of([&] { soci::session again(soci::mysql, server.soci_connection()); });
    CHECK((refused == 2002 || refused == 2003));
}

TEST_CASE("a test process killed with SIGKILL leaves no server and no folder behind") {
    // This binary, run as "hold-server", starts a server and waits to be killed.
    idem::test::spawn_options spawn;
    spawn.argv = {"/proc/self/exe", "hold-server"};
    spawn.pipe_stdout = true;
    idem::test::child_process holder(std::move(spawn));
    const auto line = holder.read_line(60s);
    REQUIRE(line.has_value());
    std::istringstream fields(*line);
    pid_t pid = 0;
    std::string dir;
    fields >> pid >> dir;
    REQUIRE(pid > 0);
    REQUIRE(std::filesystem::exists(std::filesystem::path(dir) / "mariadbd.pid"));

    holder.signal(SIGKILL);
    holder.reap();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while ((!idem::test::process_gone(pid) || std::filesystem::exists(dir)) &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    CHECK(idem::test::process_gone(pid));
    CHECK_FALSE(std::filesystem::exists(dir));
}

int main(int argc, char** argv) {
    if (argc == 2 && std::string_view(argv[1]) == "hold-server") {
        mariadb_server server;
        std::printf("%d %s\n", static_cast<int>(server.process().pid()), server.process().dir().c_str());
        std::fflush(stdout);
        for (;;) pause();
    }
    doctest::Context context(argc, argv);
    return context.run();
}
