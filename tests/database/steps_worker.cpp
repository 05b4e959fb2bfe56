// A child process for the crash tests of idem::database::steps and the completer.
//
//   steps_worker pay <url> <op> <lease_ms> <point>      run steps_bank::pay (database::steps); at <point>
//                                                       print "at <point>" and wait to be killed (SIGKILL)
//   steps_worker operation <url> <op> <lease_ms> <point>  the same through steps_bank::payment, the
//                                                       operation a completer can finish (its input stored)
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "steps_bank.hpp"
#include "worker_main.hpp"

namespace {

namespace bank = idem::test::steps_bank;

int pay(const std::vector<std::string>& args, bool registered) {
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
    const auto payment = bank::payment(db, at);
    auto e = registered ? bank::pay_with(payment, db, op, 25, {.lease = lease})
                        : bank::pay(db, op, 25, at, {.lease = lease});
    std::cout << "done " << idem::to_string(e.status()) << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return idem::test::run_worker(
        "steps_worker", argc, argv,
        {{"pay", "URL OP LEASE_MS POINT", [](const std::vector<std::string>& a) { return pay(a, false); }},
         {"operation", "URL OP LEASE_MS POINT", [](const std::vector<std::string>& a) { return pay(a, true); }}});
}
