// A child process a test starts, talks to through pipes and always ends.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::test {

struct spawn_options {
    std::vector<std::string> argv;      // argv[0]: a path, or a name looked up in PATH
    std::filesystem::path working_dir;  // empty: this process's
    bool as_server_user = false;        // run as server_user() (drops root)
    bool own_process_group = false;     // a group of its own (its children die with it)
    bool pipe_stdin = false;            // else /dev/null
    bool pipe_stdout = false;           // stderr stays this process's
    std::filesystem::path output_file;  // without pipe_stdout: stdout and stderr go here, else are inherited
};

class child_process {
public:
    explicit child_process(spawn_options options);
    // SIGKILLs and reaps it when it still runs: a failed test leaves no process behind.
    ~child_process();
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    [[nodiscard]] pid_t pid() const noexcept { return pid_; }

    void write(std::string_view text);
    void close_stdin();
    // The next line of its stdout without the newline; nullopt at end of file.
    // Throws std::runtime_error when nothing arrives within `timeout`.
    [[nodiscard]] std::optional<std::string> read_line(std::chrono::milliseconds timeout);

    void signal(int sig);
    // True once it has exited; it stays a zombie (its pid taken) until reap().
    [[nodiscard]] bool wait_for_exit(std::chrono::milliseconds timeout);
    // Waits for it and returns its wait status.
    int reap();

private:
    pid_t pid_ = -1;
    int stdin_ = -1;
    int stdout_ = -1;
    std::string buffered_;
    std::optional<int> status_;
};

// Whether a process the test stopped (SIGTERM, SIGKILL) ran cleanly, from its
// wait status: an exit status other than 0 is a failure of its own (a
// sanitizer's report exits 1 or 66, maybe before the test's signal came); an
// end by the test's signal is not.
[[nodiscard]] bool stopped_cleanly(int status);

// Gone, or a zombie nobody has reaped yet (it holds no files and writes nothing).
[[nodiscard]] bool process_gone(pid_t pid);

}  // namespace idem::test
