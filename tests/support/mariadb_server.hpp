// The MariaDB server tests use: a throwaway one, or one named by IDEM_TEST_MARIADB.
//
//   mariadb_server server;                  // mariadb-install-db + mariadbd: free loopback port, unprivileged user
//   auto db = idem::database::open(server.connection());       // mariadb://root@127.0.0.1:PORT/idem
//   soci::session admin("mysql", server.soci_connection());   // host=127.0.0.1 port=PORT user=root db=idem
//   mariadb_scratch_database scratch(server.connection(), "outbox");  // a database of its own, dropped after
//   server.restart();                       // normal shutdown, then up again on the same port and data
//
// The server keeps the defaults MariaDB ships that idem must not rely on: the
// latin1 server character set (latin1_swedish_ci), REPEATABLE READ, the
// compiled-in sql_mode. It reads no option file (--no-defaults), so a
// distribution's my.cnf (Debian's sets utf8mb4) hides none of them. What it
// changes is for speed and for racing tests: no binary log, no doublewrite
// buffer, the redo log flushed once a second, a small buffer pool, 400
// connections. It listens on 127.0.0.1 and on a unix socket in its folder; the
// folder goes away with it, whatever the outcome.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "throwaway_server.hpp"

namespace idem::test {

// Where a MariaDB database is, in the two forms idem's tests use: the URL
// idem's MariaDB store takes and the connection string of SOCI's mysql backend.
struct mariadb_address {
    std::string user = "root";
    std::string password;  // empty: none
    std::string host = "127.0.0.1";
    int port = 3306;
    std::string database;  // empty: none
    // Further settings in order, named as SOCI's mysql backend names them
    // (unix_socket, charset, connect_timeout, ...): the URL's query string.
    std::vector<std::pair<std::string, std::string>> options;

    // mariadb://user[:password]@host[:port][/database][?key=value&...], or mysql://,
    // percent-encoded; std::invalid_argument when it is not one.
    [[nodiscard]] static mariadb_address parse(std::string_view url);
    // mariadb://...
    [[nodiscard]] std::string url() const;
    // host=... port=... user=... [password=...] [db=...] [key=value ...]
    [[nodiscard]] std::string soci() const;
    [[nodiscard]] mariadb_address with_database(std::string_view name) const;
    // The same with another port, e.g. a tcp_proxy's.
    [[nodiscard]] mariadb_address with_port(int other) const;
};

struct mariadb_settings {
    // innodb_flush_log_at_trx_commit. 2: each commit is written to the OS at once
    // and reaches the disk within a second, so a killed server (SIGKILL) loses no
    // commit, a crashed machine might. 1: flushed at each commit (durable, slow).
    // 0: written once a second too, so a killed server loses up to a second of commits.
    int flush_log_at_trx_commit = 2;
    // Appended to mariadbd's command line (--name=value), after idem's settings.
    std::vector<std::string> extra_args;
};

// The data folder of a new server in dir/data (mariadb-install-db: root without
// a password, no test database), as server_user().
void install_mariadb(const std::filesystem::path& dir);
// mariadbd's command line for the server whose folder is `dir`, on `port`: the
// settings above, its socket and pid file in `dir`, reading no option file.
[[nodiscard]] std::vector<std::string> mariadbd_command(const std::filesystem::path& dir, int port,
                                                        const mariadb_settings& settings);
// Whether a server at `address` accepts a connection within a second.
[[nodiscard]] bool mariadb_answers(const mariadb_address& address);
// The rows of one statement (none for a statement that returns none), each value
// as text (NULL as ""), on a connection of its own; throws std::runtime_error when it fails.
[[nodiscard]] std::vector<std::vector<std::string>> mariadb_rows(const mariadb_address& address,
                                                                 const std::string& sql);

class mariadb_server {
public:
    // An empty database of this name is there from the start, for tests that need one.
    static constexpr std::string_view default_database = "idem";

    // Creates the data folder (mariadb-install-db: root without a password, no
    // test database) and starts the server.
    explicit mariadb_server(mariadb_settings settings = {});

    // root, without a password, over TCP on 127.0.0.1.
    [[nodiscard]] mariadb_address address(std::string_view database = default_database) const;
    // The URL idem's MariaDB store takes: mariadb://root@127.0.0.1:PORT/DATABASE.
    [[nodiscard]] std::string connection(std::string_view database = default_database) const;
    // SOCI's mysql backend's: host=127.0.0.1 port=PORT user=root db=DATABASE.
    [[nodiscard]] std::string soci_connection(std::string_view database = default_database) const;
    // The same over the unix socket in the server's folder: unix_socket=PATH user=root db=DATABASE.
    [[nodiscard]] std::string soci_socket_connection(std::string_view database = default_database) const;
    [[nodiscard]] std::filesystem::path unix_socket() const { return server_.dir() / "mariadb.sock"; }
    [[nodiscard]] int port() const noexcept { return port_; }
    [[nodiscard]] throwaway_server& process() noexcept { return server_; }

    // Normal shutdown (SIGTERM): open connections are cut, their clients get
    // 2013 (lost connection) or 2006 (gone away); the data stays.
    void stop();
    // (Re)starts it on the same port and data.
    void start();
    void restart() {
        stop();
        start();
    }

private:
    mariadb_settings settings_;
    int port_;
    throwaway_server server_;
};

// A database of its own, named after `label` and this process, on the server
// the URL `server` reaches (its database part is ignored); its connections are
// killed and it is dropped when the object dies. Created with the server's
// default character set: a test sees the server as it is.
class mariadb_scratch_database {
public:
    mariadb_scratch_database(std::string_view server, std::string_view label);
    ~mariadb_scratch_database();
    mariadb_scratch_database(const mariadb_scratch_database&) = delete;
    mariadb_scratch_database& operator=(const mariadb_scratch_database&) = delete;

    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] const mariadb_address& address() const noexcept { return address_; }
    [[nodiscard]] std::string connection() const { return address_.url(); }
    [[nodiscard]] std::string soci_connection() const { return address_.soci(); }

private:
    std::string name_;
    mariadb_address address_;
};

// IDEM_TEST_MARIADB (a mariadb:// or mysql:// URL whose user may create databases), when set.
[[nodiscard]] std::optional<std::string> external_mariadb();
// The database every test in this process shares, as a URL: a fresh one created
// on the external server (dropped when the process exits), else the throwaway
// server's `idem`, the server started on first use and stopped when the process exits.
[[nodiscard]] std::string shared_mariadb();

}  // namespace idem::test
