// A server process that lives only as long as the test process that started it.
//
// It runs as server_user() in a folder of its own, in a process group of its
// own, and is polled until ready. Destroying the object stops it and removes
// the folder; if the test process dies first (crash, SIGKILL, timeout) a
// watchdog does both.
//
//   throwaway_server server("redis");
//   server.start({"redis-server", "--port", port, "--dir", server.dir()}, [&] { return answers_ping(port); });
//   ...
//   server.stop();   // or let it go out of scope
#pragma once

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "temp_dir.hpp"
#include "watchdog.hpp"

namespace idem::test {

class throwaway_server {
public:
    // Creates the folder and the watchdog; starts nothing yet.
    explicit throwaway_server(std::string name);
    ~throwaway_server();
    throwaway_server(const throwaway_server&) = delete;
    throwaway_server& operator=(const throwaway_server&) = delete;

    [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_.path(); }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }

    // Starts the program (stdout and stderr to dir()/server.log) and polls `ready`
    // until it returns true. Throws, with the log's tail, when the server exits or
    // is not ready within `timeout`.
    void start(std::vector<std::string> argv, const std::function<bool()>& ready,
               std::chrono::milliseconds timeout = std::chrono::seconds(15));
    // Sends `sig` and waits for the server to exit; SIGKILLs it after `grace`.
    void stop(int sig = SIGTERM, std::chrono::milliseconds grace = std::chrono::seconds(5));
    // Waits for a server that was told to exit some other way (a shutdown command).
    void wait_stopped(std::chrono::milliseconds grace = std::chrono::seconds(5));
    // SIGSTOP / SIGCONT and the like, to the whole group.
    void signal(int sig);

    [[nodiscard]] bool running() const noexcept { return process_.has_value(); }
    [[nodiscard]] pid_t pid() const;
    [[nodiscard]] std::string log_tail(std::size_t bytes = 2000) const;

private:
    std::string name_;
    temp_dir dir_;
    watchdog watchdog_;
    std::optional<child_process> process_;
};

// Runs a server's setup step (initdb, mariadb-install-db) to completion as
// server_user(), in `dir`, its output to dir/`log`: the files it creates belong
// to the user the server will run as. Throws, with that output, when it fails
// or takes longer than `timeout`.
void run_as_server_user(std::vector<std::string> argv, const std::filesystem::path& dir, const std::string& log,
                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace idem::test
