// The PostgreSQL server tests use: a throwaway one, or one named by IDEM_TEST_POSTGRES.
//
//   postgres_server server;                  // initdb + postgres: free loopback port, unprivileged user, temp folder
//   idem::postgresql_store store{{.connection = server.conninfo()}};
//   server.restart();                        // fast shutdown, then up again on the same port and data
//   postgres_server standby{postgres_server::standby_of{server}};  // pg_basebackup -R: a streaming standby
//
// The server runs with fsync off (tests need no durability), listens on
// 127.0.0.1 and on a unix socket in its folder, and accepts enough connections
// for the racing tests. The folder goes away with it, whatever the outcome.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "throwaway_server.hpp"

namespace idem::test {

class postgres_server {
public:
    // Creates the cluster (initdb -A trust -E UTF8 --no-sync) and starts it.
    postgres_server();
    // A hot standby streaming from `primary` (pg_basebackup -R, asynchronous), on a port of its own.
    struct standby_of {
        const postgres_server& primary;
    };
    explicit postgres_server(standby_of source);

    // A libpq connection string for `database` over TCP on the loopback interface.
    [[nodiscard]] std::string conninfo(std::string_view database = "postgres") const;
    // The same over the unix socket in the server's folder.
    [[nodiscard]] std::string socket_conninfo(std::string_view database = "postgres") const;
    [[nodiscard]] int port() const noexcept { return port_; }
    [[nodiscard]] throwaway_server& process() noexcept { return server_; }

    // `sig` (SIGSTOP, SIGCONT) to the postmaster and every process it started
    // (each backend leads a process group of its own), as when the host freezes.
    void signal_all(int sig);

    // Fast shutdown (SIGINT): open connections get 57P01 and are closed; the data stays.
    void stop();
    // (Re)starts it on the same port and data.
    void start();
    void restart() {
        stop();
        start();
    }

private:
    int port_;
    throwaway_server server_;
};

// The rows of one statement, each value as text (NULL as ""), through a
// connection of its own; throws std::runtime_error when it cannot connect or the statement fails.
[[nodiscard]] std::vector<std::vector<std::string>> sql_rows(const std::string& conninfo, const std::string& sql);

// `conninfo` (libpq keywords, with a port= field) with another port, e.g. a tcp_proxy's.
[[nodiscard]] std::string with_port(const std::string& conninfo, int port);
// Its port= field; std::invalid_argument when it has none.
[[nodiscard]] int port_of(const std::string& conninfo);

// A database of its own, named after `label` and this process, on the server
// `server` (a connection string) reaches; dropped WITH (FORCE) when the object dies.
class scratch_database {
public:
    scratch_database(std::string server, std::string_view label);
    ~scratch_database();
    scratch_database(const scratch_database&) = delete;
    scratch_database& operator=(const scratch_database&) = delete;

    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] const std::string& conninfo() const noexcept { return conninfo_; }

private:
    std::string server_;
    std::string name_;
    std::string conninfo_;
};

// IDEM_TEST_POSTGRES (a libpq connection string), when set.
[[nodiscard]] std::optional<std::string> external_postgres();
// The database every test in this process shares: a fresh one created on the
// external server (dropped when the process exits), else the throwaway server
// started on first use and stopped when the process exits.
[[nodiscard]] std::string shared_postgres();

}  // namespace idem::test
