#include "watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "child_process.hpp"

namespace idem::test {
namespace {

// One message: an op ('+' watch, '-' forget) and a process group id.
constexpr std::size_t message_size = 1 + sizeof(std::int32_t);

[[noreturn]] void run_watchdog(int channel, const std::filesystem::path& dir) {
    setsid();  // outside the test's process group, so a group kill leaves it to clean up
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) signal(sig, SIG_IGN);
    if (channel < 3) channel = fcntl(channel, F_DUPFD, 3);
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    if (channel != 3) dup2(channel, 3);
    close_range(4, ~0U, 0);  // holds nothing of the test process open (sockets, pipes, other watchdogs' ends)

    std::array<pid_t, 64> groups{};
    std::size_t count = 0;
    std::array<char, message_size> message{};
    std::size_t have = 0;
    for (;;) {
        const ssize_t n = read(3, message.data() + have, message.size() - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // the test process is gone
        have += static_cast<std::size_t>(n);
        if (have < message.size()) continue;
        have = 0;
        std::int32_t group = 0;
        std::memcpy(&group, message.data() + 1, sizeof group);
        if (message[0] == '+' && count < groups.size()) groups[count++] = group;
        if (message[0] == '-') {
            for (std::size_t i = 0; i < count; ++i)
                if (groups[i] == group) groups[i] = groups[--count];
        }
    }
    for (std::size_t i = 0; i < count; ++i) kill(-groups[i], SIGKILL);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (std::size_t i = 0; i < count; ++i)
        while (!process_gone(groups[i]) && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    _exit(0);
}

}  // namespace

watchdog::watchdog(std::filesystem::path dir) {
    std::array<int, 2> ends{};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) != 0)
        throw std::system_error(errno, std::generic_category(), "socketpair");
    pid_ = fork();
    if (pid_ < 0) {
        const int saved = errno;
        close(ends[0]);
        close(ends[1]);
        throw std::system_error(saved, std::generic_category(), "fork");
    }
    if (pid_ == 0) run_watchdog(ends[1], dir);
    close(ends[1]);
    socket_ = ends[0];
}

watchdog::~watchdog() {
    close(socket_);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
}

void watchdog::watch(pid_t group) {
    send('+', group);
}

void watchdog::forget(pid_t group) {
    send('-', group);
}

void watchdog::send(char op, pid_t group) {
    std::array<char, message_size> message{op};
    const std::int32_t id = group;
    std::memcpy(message.data() + 1, &id, sizeof id);
    if (::send(socket_, message.data(), message.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(message.size()))
        throw std::system_error(errno, std::generic_category(), "the watchdog is gone");
}

}  // namespace idem::test
