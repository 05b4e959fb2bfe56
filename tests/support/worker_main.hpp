// What every worker executable of the multi-process tests shares: starting at
// the instant the test names, and running the command its arguments name.
#pragma once

#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace idem::test {

// "go <t>": start at t (system_clock nanoseconds since the epoch), the same
// instant in every worker, so that no process gets a head start
// (release_together in worker_processes.hpp sends it).
inline void await_go() {
    std::string word;
    long long start = 0;
    if (!(std::cin >> word >> start) || word != "go") std::exit(3);
    std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::nanoseconds(start)));
}

// `worker NAME ARGUMENTS...`: what the command is called, its arguments as the
// usage line shows them (one word each), and what runs it given those arguments.
struct worker_command {
    std::string name;
    std::string arguments;
    std::function<int(const std::vector<std::string>&)> run;
};

// Runs the command argv names and returns its exit code; 1 when it throws (the
// error on stderr), 2 and the usage line when no command takes these arguments.
inline int run_worker(const std::string& program, int argc, char** argv, const std::vector<worker_command>& commands) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    for (const worker_command& command : commands) {
        std::istringstream words(command.arguments);
        const auto arity = std::distance(std::istream_iterator<std::string>(words), {});
        if (args.empty() || args[0] != command.name || std::ssize(args) != arity + 1) continue;
        try {
            return command.run({args.begin() + 1, args.end()});
        } catch (const std::exception& e) {
            std::cerr << program << ": " << e.what() << "\n";
            return 1;
        }
    }
    std::cerr << "usage: " << program;
    for (std::size_t i = 0; i < commands.size(); ++i)
        std::cerr << (i == 0 ? " " : " | ") << commands[i].name << " " << commands[i].arguments;
    std::cerr << "\n";
    return 2;
}

}  // namespace idem::test
