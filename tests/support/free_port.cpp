#include "free_port.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

namespace idem::test {
namespace {

int any_free_loopback_port() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    auto* generic = reinterpret_cast<sockaddr*>(&address);
    const bool ok = bind(fd, generic, sizeof address) == 0 && getsockname(fd, generic, &length) == 0;
    const int saved = errno;
    close(fd);
    if (!ok) throw std::runtime_error(std::string("cannot find a free loopback port: ") + std::strerror(saved));
    return ntohs(address.sin_port);
}

}  // namespace

// The kernel may hand the same free port out twice, and servers that bind with
// SO_REUSEPORT (cpp-httplib's) then share it: one process's requests reach the
// other. A port is therefore never handed out twice in one process.
int free_loopback_port() {
    static std::mutex mutex;
    static std::set<int> handed_out;
    const std::lock_guard lock(mutex);
    for (int attempt = 0; attempt < 100; ++attempt)
        if (const int port = any_free_loopback_port(); handed_out.insert(port).second) return port;
    throw std::runtime_error("cannot find a loopback port not handed out before");
}

}  // namespace idem::test
