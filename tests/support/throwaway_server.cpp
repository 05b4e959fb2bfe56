#include "throwaway_server.hpp"

#include <sys/wait.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace idem::test {

throwaway_server::throwaway_server(std::string name) : name_(std::move(name)), dir_(name_), watchdog_(dir_.path()) {}

throwaway_server::~throwaway_server() {
    if (!process_) return;
    try {
        signal(SIGCONT);  // a paused server cannot act on SIGTERM
        stop();
    } catch (...) {
        // the watchdog still kills the group once this process ends
    }
}

void throwaway_server::start(std::vector<std::string> argv, const std::function<bool()>& ready,
                             std::chrono::milliseconds timeout) {
    if (process_) throw std::logic_error(name_ + " is already running");
    spawn_options options;
    options.argv = std::move(argv);
    options.working_dir = dir();
    options.as_server_user = true;
    options.own_process_group = true;
    options.output_file = dir() / "server.log";
    process_.emplace(std::move(options));
    watchdog_.watch(process_->pid());

    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (process_->wait_for_exit(std::chrono::milliseconds(0))) {
            wait_stopped();
            throw std::runtime_error(name_ + " exited while starting:\n" + log_tail());
        }
        if (ready()) return;
        if (std::chrono::steady_clock::now() >= deadline) {
            stop(SIGKILL);
            throw std::runtime_error(name_ + " was not ready within " + std::to_string(timeout.count()) + " ms:\n" +
                                     log_tail());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

void throwaway_server::stop(int sig, std::chrono::milliseconds grace) {
    if (!process_) return;
    signal(sig);
    wait_stopped(grace);
}

void throwaway_server::wait_stopped(std::chrono::milliseconds grace) {
    if (!process_) return;
    if (!process_->wait_for_exit(grace)) {
        signal(SIGKILL);
        (void)process_->wait_for_exit(std::chrono::seconds(30));
    }
    // Forgotten while its leader is a zombie, so the group id cannot be reused in between.
    ::kill(-process_->pid(), SIGKILL);  // anything the server left behind in its group
    watchdog_.forget(process_->pid());
    process_.reset();  // reaps
}

void throwaway_server::signal(int sig) {
    if (process_ && ::kill(-process_->pid(), sig) != 0 && errno != ESRCH)
        throw std::system_error(errno, std::generic_category(), "kill " + name_);
}

pid_t throwaway_server::pid() const {
    if (!process_) throw std::logic_error(name_ + " is not running");
    return process_->pid();
}

std::string throwaway_server::log_tail(std::size_t bytes) const {
    std::ifstream log(dir() / "server.log");
    std::stringstream text;
    text << log.rdbuf();
    const std::string all = text.str();
    return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

void run_as_server_user(std::vector<std::string> argv, const std::filesystem::path& dir, const std::string& log,
                        std::chrono::milliseconds timeout) {
    spawn_options options;
    const std::string program = argv.front();
    options.argv = std::move(argv);
    options.working_dir = dir;
    options.as_server_user = true;
    options.output_file = dir / log;
    child_process child(std::move(options));
    if (!child.wait_for_exit(timeout))
        throw std::runtime_error(program + " did not finish within " + std::to_string(timeout.count()) + " ms");
    const int status = child.reap();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::ifstream in(dir / log);
        std::stringstream output;
        output << in.rdbuf();
        throw std::runtime_error(program + " failed:\n" + output.str());
    }
}

}  // namespace idem::test
