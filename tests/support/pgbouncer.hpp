// A throwaway PgBouncer (Debian's pgbouncer) in front of a PostgreSQL server.
//
//   postgres_server server;
//   pgbouncer pooler(server.port(), {.pool_mode = "transaction", .pool_size = 2});
//   idem::database::open(pooler.conninfo("bank"), {.transaction_pooler = true});
//
// It listens on a free loopback port, lets the server's superuser in without a
// password (auth_type=trust), and serves every database of the server through
// `pool_size` server connections per database and user, so its clients share them.
#pragma once

#include <string>
#include <string_view>

#include "throwaway_server.hpp"

namespace idem::test {

struct pgbouncer_options {
    std::string pool_mode = "transaction";
    int pool_size = 2;
};

class pgbouncer {
public:
    pgbouncer(int postgres_port, pgbouncer_options options);

    // A libpq connection string for `database` through the pooler.
    [[nodiscard]] std::string conninfo(std::string_view database = "postgres") const;
    [[nodiscard]] int port() const noexcept { return port_; }
    [[nodiscard]] throwaway_server& process() noexcept { return server_; }

private:
    int port_;
    throwaway_server server_;
};

}  // namespace idem::test
