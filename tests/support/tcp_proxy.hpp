// A TCP relay on loopback between a client and a server, which a test can cut:
// the client's connection breaks while the server goes on with what it was
// sent (a COMMIT it is running commits), as when a network path fails.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace idem::test {

class tcp_proxy {
public:
    // Relays connections to 127.0.0.1:target_port from a free loopback port.
    explicit tcp_proxy(int target_port);
    ~tcp_proxy();
    tcp_proxy(const tcp_proxy&) = delete;
    tcp_proxy& operator=(const tcp_proxy&) = delete;

    [[nodiscard]] int port() const noexcept { return port_; }
    // Closes every relayed connection on both sides; new ones are relayed again.
    void sever();

private:
    void accept_loop();
    void relay(int client, int server);

    int port_ = 0;
    int target_port_;
    int listener_ = -1;
    std::atomic<bool> stopping_{false};
    std::mutex mutex_;
    std::vector<int> sockets_;  // every socket of a live relay
    std::vector<std::thread> relays_;
    std::thread acceptor_;
};

}  // namespace idem::test
