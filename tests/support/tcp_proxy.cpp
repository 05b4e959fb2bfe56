#include "tcp_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace idem::test {
namespace {

sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

}  // namespace

tcp_proxy::tcp_proxy(int target_port) : target_port_(target_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(0);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_, 64) != 0)
        throw std::runtime_error("tcp_proxy: cannot listen");
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
}

tcp_proxy::~tcp_proxy() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    ::close(listener_);
    sever();
    for (auto& t : relays_) t.join();
}

void tcp_proxy::sever() {
    const std::lock_guard lock(mutex_);
    for (int s : sockets_) ::shutdown(s, SHUT_RDWR);
}

void tcp_proxy::accept_loop() {
    while (!stopping_) {
        const int client = ::accept(listener_, nullptr, nullptr);
        if (client < 0) return;
        const int server = ::socket(AF_INET, SOCK_STREAM, 0);
        const sockaddr_in target = loopback(target_port_);
        if (::connect(server, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
            ::close(client);
            ::close(server);
            continue;
        }
        const std::lock_guard lock(mutex_);
        sockets_.push_back(client);
        sockets_.push_back(server);
        relays_.emplace_back([this, client, server] { relay(client, server); });
    }
}

void tcp_proxy::relay(int client, int server) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    char buffer[65536];
    for (bool open = true; open;) {
        if (::poll(fds, 2, -1) < 0) break;
        for (int i = 0; i < 2 && open; ++i) {
            if (fds[i].revents == 0) continue;
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n <= 0) {
                open = false;
                break;
            }
            for (ssize_t sent = 0; sent < n && open;) {
                const ssize_t w =
                    ::send(fds[1 - i].fd, buffer + sent, static_cast<std::size_t>(n - sent), MSG_NOSIGNAL);
                if (w <= 0)
                    open = false;
                else
                    sent += w;
            }
        }
    }
    const std::lock_guard lock(mutex_);
    for (int s : {client, server}) {
        ::shutdown(s, SHUT_RDWR);
        ::close(s);
        sockets_.erase(std::remove(sockets_.begin(), sockets_.end(), s), sockets_.end());
    }
}

}  // namespace idem::test
