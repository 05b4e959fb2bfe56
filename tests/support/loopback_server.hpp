// A cpp-httplib server on a free loopback port, listening on a thread of its own,
// and what a webhook receiver behind it takes from a request.
#pragma once

#include <httplib.h>

#include <chrono>
#include <thread>

#include "idem/http/httplib.hpp"
#include "idem/webhook.hpp"

namespace idem::test {

class loopback_server {
public:
    // Routes are added to `server` before start().
    httplib::Server server;

    ~loopback_server() { stop(); }

    // Binds with a backlog for bursts (any free port, or `port`) and serves until stop().
    void start(int port = 0) {
        port_ = http::bind_with_backlog(server, "127.0.0.1", port);
        thread_ = std::thread([this] { server.listen_after_bind(); });
        while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    void stop() {
        if (!thread_.joinable()) return;
        server.stop();
        thread_.join();
    }

    [[nodiscard]] int port() const noexcept { return port_; }
    [[nodiscard]] httplib::Client client() const {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(std::chrono::seconds(10));
        return c;
    }

private:
    std::thread thread_;
    int port_ = 0;
};

// The delivery a webhook receiver verifies: the request's body and every header.
[[nodiscard]] inline webhook::delivery delivery_of(const httplib::Request& request) {
    webhook::delivery d{.body = request.body};
    for (const auto& [name, value] : request.headers) d.headers.emplace_back(name, value);
    return d;
}

}  // namespace idem::test
