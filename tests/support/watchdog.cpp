#include "watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

namespace idem::test {
namespace {

// One message: an op ('+' watch, '-' forget) and a process group id.
constexpr std::size_t message_size = 1 + sizeof(std::int32_t);

// The watchdog is forked from a process that runs threads, so until it execs it
// makes system calls only: a thread of the test may have held an allocator's
// lock at the fork (AddressSanitizer's is not released in the child), and a
// child that allocates would wait on it forever. Fixed buffers, /proc read
// raw, and the folder removed by exec'ing rm.

// A group's leader that exited (a zombie whose parent died with the test) or no longer exists.
bool leader_gone(pid_t pid) {
    std::array<char, 32> path{"/proc/"};
    char* end = std::to_chars(path.data() + 6, path.data() + path.size() - 6, pid).ptr;
    std::memcpy(end, "/stat", 6);
    const int fd = open(path.data(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    std::array<char, 512> line{};
    const ssize_t n = read(fd, line.data(), line.size());
    close(fd);
    if (n <= 0) return true;
    // The command name may hold spaces and parentheses: the state follows the last ')'.
    const auto* close_paren = static_cast<const char*>(memrchr(line.data(), ')', static_cast<std::size_t>(n)));
    if (close_paren == nullptr || close_paren + 2 >= line.data() + n) return true;
    const char state = close_paren[2];
    return state == 'Z' || state == 'X';
}

[[noreturn]] void run_watchdog(int channel, const char* dir) {
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
        while (!leader_gone(groups[i]) && std::chrono::steady_clock::now() < deadline) {
            const timespec pause{0, 5'000'000};
            nanosleep(&pause, nullptr);
        }
    execl("/bin/rm", "rm", "-rf", "--", dir, static_cast<char*>(nullptr));
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
    if (pid_ == 0) run_watchdog(ends[1], dir.c_str());
    close(ends[1]);
    socket_ = ends[0];
}

watchdog::~watchdog() {
    close(socket_);
    // It ends within its 5 s for the groups; a watchdog that does not is killed, never waited on forever.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid_, SIGKILL);
            while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
            }
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
