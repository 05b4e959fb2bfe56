#include "pass_threads.hpp"

#include <exception>
#include <string>
#include <utility>

#include "internal/exception_text.hpp"
#include "internal/retry_schedule.hpp"

namespace idem::detail {

pass_threads::pass_threads(std::function<std::size_t()> pass, std::function<void()> report, pass_settings settings)
    : pass_threads([pass = std::move(pass)] { return thread_work{.pass = pass}; }, std::move(report),
                   std::move(settings)) {}

pass_threads::pass_threads(std::function<thread_work()> for_each_thread, std::function<void()> report,
                           pass_settings settings)
    : for_each_thread_(std::move(for_each_thread)), report_(std::move(report)), settings_(std::move(settings)) {
    if (!settings_.telemetry) settings_.telemetry = null_sink();
}

pass_threads::~pass_threads() {
    stop();
}

void pass_threads::start() {
    const std::lock_guard one_at_a_time(lifecycle_);
    std::lock_guard lock(mutex_);
    if (!threads_.empty()) return;
    stopping_ = false;
    for (int i = 0; i < settings_.threads; ++i) threads_.emplace_back([this] { loop(); });
}

void pass_threads::stop() {
    const std::lock_guard one_at_a_time(lifecycle_);
    std::vector<std::thread> ending;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        ending = std::move(threads_);
        threads_.clear();
    }
    wake_.notify_all();
    for (std::thread& t : ending) t.join();
    // A pass that ended after the last report is in no report yet: the sink
    // ends with the figures as they stand once the threads are done.
    if (!ending.empty() && settings_.report_every.count() != 0) report();
}

bool pass_threads::running() const {
    std::lock_guard lock(mutex_);
    return !threads_.empty();
}

void pass_threads::log_failure(std::string_view event, const std::string& what) const {
    settings_.telemetry->on_log({.level = log_level::warning, .name = event, .key_hash = {}, .message = what});
}

void pass_threads::maybe_report() {
    if (settings_.report_every.count() == 0) return;
    {
        std::lock_guard lock(mutex_);
        const auto now = std::chrono::steady_clock::now();
        if (now - last_report_ < settings_.report_every) return;
        last_report_ = now;
    }
    report();
}

void pass_threads::report() {
    // The figures are read from the database: when that fails, the pass that
    // ran still stands, and the next report reads them again.
    try {
        report_();
    } catch (...) {
        log_failure(settings_.report_failure_event, what_of(std::current_exception()));
    }
}

bool pass_threads::rest(std::chrono::milliseconds pause) {
    std::unique_lock lock(mutex_);
    return !wake_.wait_for(lock, pause, [&] { return stopping_; });
}

void pass_threads::loop() {
    const thread_work work = for_each_thread_();
    passes(work.pass);
    if (!work.finish) return;
    try {
        work.finish();
    } catch (...) {
        // What it left comes due again when its lease ends.
        log_failure(settings_.failure_event, what_of(std::current_exception()));
    }
}

void pass_threads::passes(const std::function<std::size_t()>& pass) {
    int failures = 0;
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return;
        }
        std::chrono::milliseconds pause{0};
        try {
            const std::size_t found = pass();
            failures = 0;
            maybe_report();
            if (found == 0) pause = settings_.idle_wait;
        } catch (...) {
            // The database failed (down, busy): what the pass left half done
            // comes due again when its lease ends. Back off, doubling up to 64 idle waits.
            ++failures;
            log_failure(settings_.failure_event, what_of(std::current_exception()));
            pause = std::chrono::duration_cast<std::chrono::milliseconds>(
                backoff_after({.first = settings_.idle_wait, .ceiling = settings_.idle_wait * 64}, failures));
        }
        if (pause.count() > 0 && !rest(pause)) return;
    }
}

}  // namespace idem::detail
