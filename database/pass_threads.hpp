// The threads of a background worker on a database (the outbox relay, the
// completer): each runs one pass after another until stopped, rests when a
// pass found nothing to do, backs off while the database fails, and reports
// the worker's figures at most every report_every, and once more on stop().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "idem/telemetry.hpp"

namespace idem::detail {

struct pass_settings {
    int threads = 1;
    std::chrono::milliseconds idle_wait{200};  // after a pass that found nothing (and the first wait after a failure)
    std::chrono::milliseconds report_every{1000};  // 0: never
    std::string_view failure_event;                // the log event of a failed pass, e.g. "idem.outbox.relay_failed"
    std::string_view report_failure_event;         // the log event of a report whose figures could not be read
    std::shared_ptr<telemetry_sink> telemetry;
};

// What one thread runs: pass() one pass after another, how many items it
// found (0: rest idle_wait before the next; an exception is a failed pass);
// finish(), if any, once when the thread stops: what its passes left to do
// (a pass may leave work for the next, done in that pass's transaction).
struct thread_work {
    std::function<std::size_t()> pass;
    std::function<void()> finish = {};
};

class pass_threads {
public:
    // Every thread runs `pass`. report(): the worker's figures to the telemetry sink.
    pass_threads(std::function<std::size_t()> pass, std::function<void()> report, pass_settings settings);
    // Each thread runs what `for_each_thread` gives it (state of its own).
    pass_threads(std::function<thread_work()> for_each_thread, std::function<void()> report, pass_settings settings);
    ~pass_threads();  // stops
    pass_threads(const pass_threads&) = delete;
    pass_threads& operator=(const pass_threads&) = delete;

    void start();
    void stop();
    [[nodiscard]] bool running() const;

private:
    void loop();
    void passes(const std::function<std::size_t()>& pass);
    void maybe_report();
    void report();
    void log_failure(std::string_view event, const std::string& what) const;
    // Waits `pause` unless stop() is called meanwhile; false once stopping.
    bool rest(std::chrono::milliseconds pause);

    std::function<thread_work()> for_each_thread_;
    std::function<void()> report_;
    pass_settings settings_;
    std::mutex lifecycle_;      // one start() or stop() at a time, so a start never meets threads still ending
    mutable std::mutex mutex_;  // guards threads_, stopping_, last_report_
    std::condition_variable wake_;
    std::vector<std::thread> threads_;
    bool stopping_ = false;
    std::chrono::steady_clock::time_point last_report_{};
};

}  // namespace idem::detail
