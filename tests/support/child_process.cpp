#include "child_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include "temp_dir.hpp"

namespace idem::test {
namespace {

[[noreturn]] void fail(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}

// A socket pair rather than a pipe: writes to a child that died fail with EPIPE
// (MSG_NOSIGNAL) instead of killing the test with SIGPIPE.
std::array<int, 2> channel() {
    std::array<int, 2> ends{};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) != 0) fail("socketpair");
    return ends;
}

[[noreturn]] void report_errno_and_exit(int report) {
    const int e = errno;
    (void)!::write(report, &e, sizeof e);
    _exit(127);
}

// Runs in the child between fork and exec: system calls only. Reports errno through `report`.
[[noreturn]] void exec_child(const spawn_options& o, char* const* argv, int in, int out, int err, int report) {
    auto die = [report] { report_errno_and_exit(report); };
    if (o.own_process_group && setpgid(0, 0) != 0) die();
    if (dup2(in, 0) < 0) die();
    if (out >= 0 && dup2(out, 1) < 0) die();
    if (err >= 0 && dup2(err, 2) < 0) die();
    if (!o.working_dir.empty() && chdir(o.working_dir.c_str()) != 0) die();
    if (o.as_server_user && server_user::get().switch_needed) {
        const auto& user = server_user::get();
        if (setgroups(0, nullptr) != 0 || setgid(user.gid) != 0 || setuid(user.uid) != 0) die();
    }
    execvp(argv[0], argv);
    report_errno_and_exit(report);
}

}  // namespace

child_process::child_process(spawn_options options) {
    if (options.argv.empty()) throw std::invalid_argument("child_process: no program");
    (void)server_user::get();  // resolved before fork: the child may only make system calls
    std::vector<char*> argv;
    for (auto& arg : options.argv) argv.push_back(arg.data());
    argv.push_back(nullptr);

    int in = -1;
    int out = -1;
    int err = -1;
    if (options.pipe_stdin) {
        const auto ends = channel();
        in = ends[0];
        stdin_ = ends[1];
    } else {
        in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    if (options.pipe_stdout) {
        const auto ends = channel();
        out = ends[1];
        stdout_ = ends[0];
    } else if (!options.output_file.empty()) {
        out = open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (out < 0) fail("open " + options.output_file.string());
        err = out;
    }
    std::array<int, 2> report{};
    if (pipe2(report.data(), O_CLOEXEC) != 0) fail("pipe2");

    pid_ = fork();
    if (pid_ == 0) exec_child(options, argv.data(), in, out, err, report[1]);
    const int fork_errno = errno;
    for (int fd : {in, out, report[1]})
        if (fd >= 0) close(fd);
    if (pid_ < 0) {
        close(report[0]);
        errno = fork_errno;
        fail("fork");
    }
    // exec closes the report pipe (CLOEXEC): end of file means the program runs.
    int child_errno = 0;
    ssize_t n = 0;
    while ((n = read(report[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
    }
    close(report[0]);
    if (n > 0) {
        reap();
        errno = child_errno;
        fail("cannot start " + options.argv[0]);
    }
}

child_process::~child_process() {
    if (!status_) {
        ::kill(pid_, SIGKILL);
        reap();
    }
    for (int fd : {stdin_, stdout_})
        if (fd >= 0) close(fd);
}

void child_process::write(std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = send(stdin_, text.data(), text.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("write to child " + std::to_string(pid_));
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

void child_process::close_stdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
}

std::optional<std::string> child_process::read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (const auto newline = buffered_.find('\n'); newline != std::string::npos) {
            std::string line = buffered_.substr(0, newline);
            buffered_.erase(0, newline + 1);
            return line;
        }
        using std::chrono::milliseconds;
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd ready{stdout_, POLLIN, 0};
        const int polled = poll(&ready, 1, static_cast<int>(std::max(left, milliseconds(0)).count()));
        if (polled < 0 && errno == EINTR) continue;
        if (polled < 0) fail("poll");
        if (polled == 0)
            throw std::runtime_error("child " + std::to_string(pid_) + " wrote no line within " +
                                     std::to_string(timeout.count()) + " ms");
        std::array<char, 4096> chunk{};
        const ssize_t n = read(stdout_, chunk.data(), chunk.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("read from child " + std::to_string(pid_));
        if (n == 0) {
            if (buffered_.empty()) return std::nullopt;
            return std::exchange(buffered_, {});
        }
        buffered_.append(chunk.data(), static_cast<std::size_t>(n));
    }
}

void child_process::signal(int sig) {
    if (!status_ && ::kill(pid_, sig) != 0) fail("kill " + std::to_string(pid_));
}

bool child_process::wait_for_exit(std::chrono::milliseconds timeout) {
    if (status_) return true;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        siginfo_t info{};
        if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno != EINTR)
            fail("waitid");
        if (info.si_pid == pid_) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

int child_process::reap() {
    if (status_) return *status_;
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0)
        if (errno != EINTR) fail("waitpid");
    status_ = status;
    return status;
}

bool stopped_cleanly(int status) {
    return !WIFEXITED(status) || WEXITSTATUS(status) == 0;
}

bool process_gone(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const auto close_paren = line.rfind(')');  // the command name may hold spaces and parentheses
    if (close_paren == std::string::npos || close_paren + 2 >= line.size()) return true;
    const char state = line[close_paren + 2];
    return state == 'Z' || state == 'X';
}

}  // namespace idem::test
