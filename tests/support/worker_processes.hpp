// Worker processes a test starts together: spawned with pipes, released at one
// instant, read line by line. The racing and crash tests of every store use them.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "child_process.hpp"

namespace idem::test {

inline std::unique_ptr<child_process> start_worker(const std::vector<std::string>& args) {
    spawn_options spawn;
    spawn.argv = args;
    spawn.pipe_stdin = true;
    spawn.pipe_stdout = true;
    return std::make_unique<child_process>(std::move(spawn));
}

inline std::vector<std::unique_ptr<child_process>> start_workers(int n, const std::vector<std::string>& args) {
    std::vector<std::unique_ptr<child_process>> children;
    for (int i = 0; i < n; ++i) children.push_back(start_worker(args));
    return children;
}

// Starts every worker at one instant a little ahead ("go NANOSECONDS"), once all have connected.
inline void release_together(std::vector<std::unique_ptr<child_process>>& children) {
    using namespace std::chrono_literals;
    const auto at = std::chrono::system_clock::now() + 500ms;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
    for (auto& c : children) c->write("go " + std::to_string(ns) + "\n");
}

inline std::string line_of(child_process& c) {
    using namespace std::chrono_literals;
    auto line = c.read_line(60s);
    if (!line) throw std::runtime_error("the worker ended without answering");
    return *line;
}

// The exit code, or 128 + the signal that ended it.
inline int exit_code(child_process& c) {
    const int status = c.reap();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace idem::test
