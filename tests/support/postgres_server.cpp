#include "postgres_server.hpp"

#include <libpq-fe.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "free_port.hpp"
#include "process_tree.hpp"

#ifndef IDEM_POSTGRES_BINDIR
#define IDEM_POSTGRES_BINDIR "/usr/lib/postgresql/15/bin"
#endif

namespace idem::test {
namespace {

using namespace std::chrono_literals;

const std::string bindir = IDEM_POSTGRES_BINDIR;
constexpr const char* superuser = "idem";

bool accepts_connections(const std::string& conninfo) {
    return PQping(conninfo.c_str()) == PQPING_OK;
}

// One statement through libpq, for the database housekeeping below.
void execute(const std::string& conninfo, const std::string& sql) {
    PGconn* conn = PQconnectdb(conninfo.c_str());
    const std::unique_ptr<PGconn, decltype(&PQfinish)> owner(conn, PQfinish);
    if (PQstatus(conn) != CONNECTION_OK)
        throw std::runtime_error(std::string("cannot connect: ") + PQerrorMessage(conn));
    PGresult* r = PQexec(conn, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) throw std::runtime_error(sql + ": " + PQerrorMessage(conn));
}

// Replaces (or adds) dbname in a key=value connection string or a URI.
std::string with_database(const std::string& conninfo, const std::string& database) {
    PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), nullptr);
    if (options == nullptr) throw std::runtime_error("IDEM_TEST_POSTGRES is not a valid libpq connection string");
    std::string out;
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (o->val == nullptr || std::string_view(o->keyword) == "dbname") continue;
        std::string value = o->val;
        std::string quoted;
        for (char c : value) {
            if (c == '\'' || c == '\\') quoted += '\\';
            quoted += c;
        }
        out += std::string(o->keyword) + "='" + quoted + "' ";
    }
    PQconninfoFree(options);
    return out + "dbname=" + database;
}

}  // namespace

postgres_server::postgres_server() : port_(free_loopback_port()), server_("postgres") {
    run_as_server_user({bindir + "/initdb", "-D", (server_.dir() / "data").string(), "-A", "trust", "-E", "UTF8",
                        "--locale=C", "--no-sync", "-U", superuser},
                       server_.dir(), "initdb.log");
    start();
}

postgres_server::postgres_server(standby_of source) : port_(free_loopback_port()), server_("postgres-standby") {
    run_as_server_user(
        {bindir + "/pg_basebackup", "-h", "127.0.0.1", "-p", std::to_string(source.primary.port()), "-U", superuser,
         "-D", (server_.dir() / "data").string(), "-R", "-X", "stream", "--no-sync", "--checkpoint=fast"},
        server_.dir(), "pg_basebackup.log");
    start();
}

void postgres_server::signal_all(int sig) {
    signal_tree(server_.pid(), sig);
}

std::vector<std::vector<std::string>> sql_rows(const std::string& conninfo, const std::string& sql) {
    PGconn* conn = PQconnectdb(conninfo.c_str());
    const std::unique_ptr<PGconn, decltype(&PQfinish)> owner(conn, PQfinish);
    if (PQstatus(conn) != CONNECTION_OK) throw std::runtime_error(std::string("connect: ") + PQerrorMessage(conn));
    PGresult* r = PQexec(conn, sql.c_str());
    const std::unique_ptr<PGresult, decltype(&PQclear)> result(r, PQclear);
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
        throw std::runtime_error(sql + ": " + PQerrorMessage(conn));
    std::vector<std::vector<std::string>> rows;
    for (int i = 0; i < PQntuples(r); ++i) {
        rows.emplace_back();
        for (int j = 0; j < PQnfields(r); ++j) rows.back().emplace_back(PQgetvalue(r, i, j));
    }
    return rows;
}

std::string postgres_server::conninfo(std::string_view database) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=" + superuser + " dbname=" + std::string(database);
}

std::string with_port(const std::string& conninfo, int port) {
    const auto at = conninfo.find("port=");
    if (at == std::string::npos) throw std::invalid_argument("with_port: the connection string names no port");
    const auto end = conninfo.find(' ', at);
    return conninfo.substr(0, at) + "port=" + std::to_string(port) +
           (end == std::string::npos ? std::string() : conninfo.substr(end));
}

int port_of(const std::string& conninfo) {
    const auto at = conninfo.find("port=");
    if (at == std::string::npos) throw std::invalid_argument("port_of: the connection string names no port");
    return std::stoi(conninfo.substr(at + 5));
}

std::string postgres_server::socket_conninfo(std::string_view database) const {
    return "host=" + server_.dir().string() + " port=" + std::to_string(port_) + " user=" + superuser +
           " dbname=" + std::string(database);
}

void postgres_server::start() {
    server_.start(
        {bindir + "/postgres",
         "-D",
         (server_.dir() / "data").string(),
         "-p",
         std::to_string(port_),
         "-k",
         server_.dir().string(),
         "-c",
         "listen_addresses=127.0.0.1",
         "-c",
         "fsync=off",
         "-c",
         "synchronous_commit=off",
         "-c",
         "full_page_writes=off",
         "-c",
         "max_connections=200",
         "-c",
         "shared_buffers=32MB",
         "-c",
         "log_min_messages=warning"},
        [info = conninfo()] { return accepts_connections(info); }, 30s);
}

void postgres_server::stop() {
    server_.stop(SIGINT, 10s);
}

scratch_database::scratch_database(std::string server, std::string_view label) : server_(std::move(server)) {
    static int serial = 0;
    name_ = "idem_" + std::string(label) + "_" + std::to_string(getpid()) + "_" + std::to_string(++serial);
    execute(server_, "CREATE DATABASE " + name_);
    conninfo_ = with_database(server_, name_);
}

scratch_database::~scratch_database() {
    try {
        execute(server_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (...) {
        // a destructor has no one to report to
    }
}

std::optional<std::string> external_postgres() {
    const char* value = std::getenv("IDEM_TEST_POSTGRES");
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

std::string shared_postgres() {
    if (auto external = external_postgres()) {
        static scratch_database database(*external, "test");
        return database.conninfo();
    }
    static postgres_server server;
    return server.conninfo();
}

}  // namespace idem::test
