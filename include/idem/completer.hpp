// idem/completer.hpp: finishes operations in steps that no request finishes.
// A request whose process died between two steps, or whose call kept failing,
// leaves its operation unfinished; when its lease ends, a completer takes it
// over (its fencing token moves on, so the run before can write no step more)
// and runs the same registered operation (idem/operation.hpp) on its stored
// input: completed steps return their stored results, an interrupted call is
// made again with the same call key, the rest runs. After compensate_after
// failed runs it runs the operation's compensation instead.
//
//   idem::completer completer{db, {payout, refund}, {.threads = 2}};  // idem::operation<T> objects
//   completer.start();  // threads of its own; stop() or the destructor ends them
//
// Reading and purging operations (inspect_operation, unfinished_operations,
// purge_operations): idem/operations.hpp, included here.
//
// Link idem_database (pkg-config idem-database). See docs/steps.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "idem/export.hpp"
#include "idem/operation.hpp"
#include "idem/operations.hpp"
#include "idem/options.hpp"
#include "idem/telemetry.hpp"

namespace idem {

class database;

struct completer_options {
    std::size_t batch = 16;  // operations one pass takes over, one after the other (1 to 1,000)
    int threads = 1;         // each passes on its own (1 to 64)
    // The wait between passes when nothing was due (and after the database failed).
    std::chrono::milliseconds idle_wait{1000};
    // After a run of an operation failed, the completer takes it over again
    // after this backoff: first, doubled up to max_backoff, with jitter.
    std::chrono::milliseconds first_backoff{1000};
    std::chrono::milliseconds max_backoff{300000};
    // What the completer's runs resolve their lease by (execution_options::lease,
    // else its profile's, else the executor's): longer than the operation's longest call.
    execution_options execution = {};
    // completer_metrics on the telemetry sink this often, and once more when stop() has
    // ended the threads, so the sink ends with the final figures (0: never).
    std::chrono::milliseconds report_every{1000};
    std::shared_ptr<telemetry_sink> telemetry = nullptr;
};

class IDEM_API completer {
public:
    // The operations it finishes, by namespace (they must outlive it).
    // options_error naming every invalid option, no operation, or two of one namespace.
    completer(database& db, std::vector<std::reference_wrapper<const any_operation>> operations,
              completer_options options = {});
    ~completer();  // stops
    completer(const completer&) = delete;
    completer& operator=(const completer&) = delete;

    // Starts the threads; stop() asks them to end after the run under way and
    // waits for them. Both may be called from any thread, and again.
    void start();
    void stop();
    [[nodiscard]] bool running() const;

    // One pass on the calling thread: takes over up to `batch` operations whose
    // lease ended and runs each; returns how many it found due (0: none). For
    // tests and drains; store_error when the database fails.
    std::size_t run_once();
    // The figures as of now (unfinished, overdue and lag read from the table).
    [[nodiscard]] completer_metrics metrics();

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace idem
