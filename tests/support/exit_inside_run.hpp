// A worker process that calls exit() from inside run(): its static runner dies
// with the transaction open, as exit() called from a unit of work makes it, and
// tells its telemetry sink (stdout, one logfmt line an event) how that went.
#pragma once

#include <soci/soci.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "idem/telemetry.hpp"
#include "idem/transaction_runner.hpp"

namespace idem::test {

// `open(session)` connects the session; `work(tx)` runs in the transaction, then exit(0).
template <class Open, class Work>
int exit_inside_run(Open&& open, Work&& work) {
    struct process_wide {
        soci::session session;
        std::unique_ptr<transaction_runner> runner;  // declared after the session: dies first
    };
    static process_wide held;  // destroyed by exit(), with run() still on the stack
    open(held.session);
    held.runner = std::make_unique<transaction_runner>(
        held.session, transaction_options{.telemetry = std::make_shared<log_sink>(std::cout, log_level::debug)});
    held.runner->run([&](unit_of_work& tx) {
        work(tx);
        std::exit(0);
    });
    return 5;  // not reached
}

}  // namespace idem::test
