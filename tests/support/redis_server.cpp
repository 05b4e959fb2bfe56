#include "redis_server.hpp"

#include <cstdlib>
#include <stdexcept>

#include "free_port.hpp"

#ifndef IDEM_REDIS_SERVER
#define IDEM_REDIS_SERVER "redis-server"
#endif

namespace idem::test {
namespace {

bool answers_ping(const redis_endpoint& at) {
    try {
        redis_client client(at, std::chrono::milliseconds(200));
        // Not while it is still loading its data; a server that asks for a password is up.
        const std::string answer = client.text({"PING"});
        return answer == "PONG" || answer.starts_with("NOAUTH");
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace

redis_server::redis_server(std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)), port_(free_loopback_port()), server_("redis") {
    start();
}

void redis_server::start() {
    std::vector<std::string> argv{IDEM_REDIS_SERVER,
                                  "--port",
                                  std::to_string(port_),
                                  "--bind",
                                  "127.0.0.1",
                                  "--save",
                                  "",
                                  "--appendonly",
                                  "no",
                                  "--dir",
                                  server_.dir().string(),
                                  "--unixsocket",
                                  unix_socket(),
                                  "--unixsocketperm",
                                  "700",
                                  "--daemonize",
                                  "no"};
    argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
    server_.start(std::move(argv), [at = endpoint()] { return answers_ping(at); });
}

void redis_server::stop(stop_mode mode) {
    if (!server_.running()) return;
    if (mode == keep_data) {
        try {
            redis_client client(endpoint());
            (void)client.command({"SHUTDOWN", "SAVE"});
        } catch (const std::runtime_error&) {
            // the server closes the connection instead of answering
        }
        server_.wait_stopped();
    } else {
        server_.stop();
        std::filesystem::remove(server_.dir() / "dump.rdb");
    }
}

std::optional<redis_endpoint> external_redis() {
    const char* value = std::getenv("IDEM_TEST_REDIS");
    if (value == nullptr || *value == '\0') return std::nullopt;
    const std::string text(value);
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
        throw std::runtime_error("IDEM_TEST_REDIS must be host:port, not '" + text + "'");
    return redis_endpoint{text.substr(0, colon), std::stoi(text.substr(colon + 1))};
}

redis_endpoint shared_redis() {
    if (auto external = external_redis()) return *external;
    static redis_server server;
    return server.endpoint();
}

}  // namespace idem::test
