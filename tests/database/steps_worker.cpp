// A child process for the crash tests of idem::database::steps and the completer.
//
//   steps_worker pay <url> <op> <lease_ms> <point>      run steps_bank::pay (database::steps); at <point>
//                                                       print "at <point>" and wait to be killed (SIGKILL)
//   steps_worker operation <url> <op> <lease_ms> <point>  the same through steps_bank::payment, the
//                                                       operation a completer can finish (its input stored)
//   steps_worker complete <url> <lease_ms> <point>      a completer of steps_bank::payment (compensate_after 1)
//                                                       passes until it takes an operation over; at <point> as above
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "idem/completer.hpp"
#include "steps_bank.hpp"
#include "worker_main.hpp"

namespace {

namespace bank = idem::test::steps_bank;

// A hook that, at `crash`, says so and waits for the SIGKILL.
idem::test::steps_bank::crash_hook stop_at(std::string crash) {
    return [crash = std::move(crash)](const std::string& point) {
        if (point != crash) return;
        std::cout << "at " << point << std::endl;
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    };
}

int pay(const std::vector<std::string>& args, bool registered) {
    const std::string& url = args[0];
    const std::string& op = args[1];
    const std::chrono::milliseconds lease(std::stoll(args[2]));
    idem::database db = idem::database::open(url);
    const auto at = stop_at(args[3]);
    const auto payment = bank::payment(db, at);
    auto e = registered ? bank::pay_with(payment, db, op, 25, {.lease = lease})
                        : bank::pay(db, op, 25, at, {.lease = lease});
    std::cout << "done " << idem::to_string(e.status()) << std::endl;
    return 0;
}

int complete(const std::vector<std::string>& args) {
    idem::database db = idem::database::open(args[0]);
    const auto payment = bank::payment(db, stop_at(args[2]), 1);
    idem::completer completer(db, {payment}, {.execution = {.lease = std::chrono::milliseconds(std::stoll(args[1]))}});
    // The lease of the run before may not have ended yet.
    while (completer.run_once() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::cout << "done" << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return idem::test::run_worker(
        "steps_worker", argc, argv,
        {{"pay", "URL OP LEASE_MS POINT", [](const std::vector<std::string>& a) { return pay(a, false); }},
         {"operation", "URL OP LEASE_MS POINT", [](const std::vector<std::string>& a) { return pay(a, true); }},
         {"complete", "URL LEASE_MS POINT", complete}});
}
