// The Redis server tests use: a throwaway redis-server, or one named by IDEM_TEST_REDIS.
//
//   redis_server server;                         // free loopback port, unprivileged user, temp folder
//   idem::redis_options o; o.port = server.port();
//   server.stop(redis_server::keep_data);         // SHUTDOWN SAVE
//   server.start();                               // same port, the saved keys back
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "redis_client.hpp"
#include "throwaway_server.hpp"

namespace idem::test {

class redis_server {
public:
    // Starts redis-server --port P --bind 127.0.0.1 --save "" --appendonly no --dir <its folder>,
    // listening on a unix socket in that folder too; `extra_args` are appended.
    explicit redis_server(std::vector<std::string> extra_args = {});

    [[nodiscard]] redis_endpoint endpoint() const { return {"127.0.0.1", port_}; }
    [[nodiscard]] int port() const noexcept { return port_; }
    [[nodiscard]] std::string unix_socket() const { return (server_.dir() / "redis.sock").string(); }
    [[nodiscard]] throwaway_server& process() noexcept { return server_; }

    enum stop_mode { drop_data, keep_data };
    // keep_data: SHUTDOWN SAVE, so every write the server acknowledged is back after start().
    void stop(stop_mode mode = drop_data);
    // (Re)starts it on the same port and folder.
    void start();

private:
    std::vector<std::string> extra_args_;
    int port_;
    throwaway_server server_;
};

// IDEM_TEST_REDIS=host:port, when set.
[[nodiscard]] std::optional<redis_endpoint> external_redis();
// The server every test in this process shares: the external one, else a
// throwaway server started on first use and stopped when the process exits.
[[nodiscard]] redis_endpoint shared_redis();

}  // namespace idem::test
