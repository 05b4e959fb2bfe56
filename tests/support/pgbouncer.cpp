#include "pgbouncer.hpp"

#include <libpq-fe.h>

#include <fstream>

#include "free_port.hpp"

#ifndef IDEM_PGBOUNCER
#define IDEM_PGBOUNCER "/usr/sbin/pgbouncer"
#endif

namespace idem::test {

pgbouncer::pgbouncer(int postgres_port, pgbouncer_options options) : port_(free_loopback_port()), server_("pgbouncer") {
    const auto config = server_.dir() / "pgbouncer.ini";
    const auto users = server_.dir() / "userlist.txt";
    std::ofstream(users) << "\"idem\" \"\"\n";
    std::ofstream(config) << "[databases]\n"
                          << "* = host=127.0.0.1 port=" << postgres_port << "\n"
                          << "[pgbouncer]\n"
                          << "listen_addr = 127.0.0.1\nlisten_port = " << port_ << "\n"
                          << "unix_socket_dir =\n"
                          << "auth_type = trust\nauth_file = " << users.string() << "\n"
                          << "pool_mode = " << options.pool_mode << "\n"
                          << "default_pool_size = " << options.pool_size << "\n"
                          << "max_client_conn = 200\n";
    server_.start({IDEM_PGBOUNCER, config.string()}, [this] { return PQping(conninfo().c_str()) == PQPING_OK; });
}

std::string pgbouncer::conninfo(std::string_view database) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=idem dbname=" + std::string(database);
}

}  // namespace idem::test
