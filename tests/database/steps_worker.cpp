// A child process for the crash tests of idem::database::steps.
//
//   steps_worker pay <url> <op> <lease_ms> <point>  run steps_bank::pay; at <point> print "at <point>"
//                                                   and wait to be killed (SIGKILL)
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "steps_bank.hpp"
#include "worker_main.hpp"

namespace {

int pay(const std::vector<std::string>& args) {
    const std::string& url = args[0];
    const std::string& op = args[1];
    const std::chrono::milliseconds lease(std::stoll(args[2]));
    const std::string& crash = args[3];
    idem::database db = idem::database::open(url);
    auto at = [&](const std::string& point) {
        if (point != crash) return;
        std::cout << "at " << point << std::endl;
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    };
    auto e = idem::test::steps_bank::pay(db, op, 25, at, {.lease = lease});
    std::cout << "done " << idem::to_string(e.status()) << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return idem::test::run_worker("steps_worker", argc, argv, {{"pay", "URL OP LEASE_MS POINT", pay}});
}
