// Clients that make one call after another, each with a fresh key retried
// (with that key) until it is answered, as a service's clients do after a 503
// or a lost answer; and what they saw around a fault.
//
//   idem::test::retrying_clients load(4, [&](int client, int number, const std::string& key) {
//       return post(key) == 201 ? attempt::answered : attempt::failed;
//   });
//   auto f = load.through("planned failover", [&] { cluster.perform_failover(); return clock::now(); }, 2s);
//   load.stop();
//   for (const std::string& key : load.answered()) ...
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace idem::test {

// How one attempt ended.
enum class attempt {
    answered,  // done: the key is not tried again
    failed,    // an error reached the client (a 503): tried again
    in_doubt,  // a failure whose commit may have happened: tried again
    refused,   // answered without running (the key in flight elsewhere): tried again
};

// What the clients saw around one fault.
struct fault_figures {
    std::string fault;
    std::chrono::steady_clock::time_point at;  // when the fault began
    long long to_promotion_ms = 0;      // from the fault to the new primary seen taking writes: the cluster's time
    long long after_promotion_ms = -1;  // from then to the next answer: what the service adds
    long long longest_silence_ms = 0;   // the longest time without any answer, from a second before the fault
    int failed_attempts = 0;            // attempts that failed (in doubt included), each retried with the same key
    int in_doubt = 0;                   // of those, in doubt
    int refused = 0;                    // attempts answered "in flight"
    std::size_t answered = 0;           // calls answered from a second before the fault
};

class retrying_clients {
public:
    using clock_type = std::chrono::steady_clock;
    // One attempt of client `client`'s call number `number`, whose key is `key`.
    using call = std::function<attempt(int client, int number, const std::string& key)>;

    retrying_clients(int count, call c, std::chrono::milliseconds pause = std::chrono::milliseconds(50))
        : call_(std::move(c)), pause_(pause) {
        for (int i = 0; i < count; ++i) threads_.emplace_back([this, i] { run(i); });
    }
    ~retrying_clients() { stop(); }
    retrying_clients(const retrying_clients&) = delete;
    retrying_clients& operator=(const retrying_clients&) = delete;

    void stop() {
        stop_ = true;
        for (auto& t : threads_)
            if (t.joinable()) t.join();
    }

    // Runs `fault`, which returns when it saw the new primary take writes, lets
    // the load go on for `after`, and reads what the clients saw from a second before it.
    fault_figures through(const std::string& name, const std::function<clock_type::time_point()>& fault,
                          clock_type::duration after) {
        using ms = std::chrono::milliseconds;
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const auto from = clock_type::now();
        const int failed_before = failed_, in_doubt_before = in_doubt_, refused_before = refused_;
        const auto promoted = fault();
        std::this_thread::sleep_for(after);
        fault_figures f{
            .fault = name, .at = from, .to_promotion_ms = std::chrono::duration_cast<ms>(promoted - from).count()};
        const std::lock_guard lock(mutex_);
        f.failed_attempts = failed_ - failed_before;
        f.in_doubt = in_doubt_ - in_doubt_before;
        f.refused = refused_ - refused_before;
        std::vector<clock_type::time_point> answers;
        for (const clock_type::time_point answered : answer_times_) {
            if (answered < from - std::chrono::seconds(1)) continue;
            answers.push_back(answered);
            if (answered >= promoted) {
                const long long took = std::chrono::duration_cast<ms>(answered - promoted).count();
                if (f.after_promotion_ms < 0 || took < f.after_promotion_ms) f.after_promotion_ms = took;
            }
        }
        std::sort(answers.begin(), answers.end());
        for (std::size_t i = 1; i < answers.size(); ++i)
            f.longest_silence_ms = std::max<long long>(
                f.longest_silence_ms, std::chrono::duration_cast<ms>(answers[i] - answers[i - 1]).count());
        f.answered = answers.size();
        return f;
    }

    // The keys answered, in the order they were.
    [[nodiscard]] std::vector<std::string> answered() const {
        const std::lock_guard lock(mutex_);
        return answered_;
    }
    // When each key was answered.
    [[nodiscard]] std::vector<std::pair<std::string, clock_type::time_point>> answers() const {
        const std::lock_guard lock(mutex_);
        std::vector<std::pair<std::string, clock_type::time_point>> out;
        for (std::size_t i = 0; i < answered_.size(); ++i) out.emplace_back(answered_[i], answer_times_[i]);
        return out;
    }
    [[nodiscard]] int gave_up() const { return gave_up_; }
    [[nodiscard]] int refused() const { return refused_; }

    // "c<client>-<number>": the key of a call, and back.
    static std::string key_of(int client, int number) {
        return "c" + std::to_string(client) + "-" + std::to_string(number);
    }
    static std::pair<int, int> call_of(const std::string& key) {
        const auto dash = key.find('-');
        return {std::stoi(key.substr(1, dash - 1)), std::stoi(key.substr(dash + 1))};
    }

private:
    void run(int client) {
        for (int number = 0; !stop_; ++number) {
            const std::string key = key_of(client, number);
            const auto started = clock_type::now();
            bool done = false;
            // A client gives up on a key after a minute: far past any failover here.
            while (!done && clock_type::now() - started < std::chrono::seconds(60)) {
                switch (call_(client, number, key)) {
                    case attempt::answered: done = true; break;
                    case attempt::in_doubt: ++in_doubt_; [[fallthrough]];
                    case attempt::failed: ++failed_; break;
                    case attempt::refused: ++refused_; break;
                }
                if (!done) std::this_thread::sleep_for(pause_);
            }
            if (!done) {
                ++gave_up_;
                continue;
            }
            const std::lock_guard lock(mutex_);
            answered_.push_back(key);
            answer_times_.push_back(clock_type::now());
        }
    }

    call call_;
    std::chrono::milliseconds pause_;
    std::atomic<bool> stop_{false};
    std::atomic<int> failed_{0}, in_doubt_{0}, refused_{0}, gave_up_{0};
    mutable std::mutex mutex_;
    std::vector<std::string> answered_;
    std::vector<clock_type::time_point> answer_times_;
    std::vector<std::thread> threads_;
};

// One line on what the clients saw around a fault, for a test's messages.
inline std::string describe(const fault_figures& f) {
    std::ostringstream out;
    out << f.fault << ": writable again (a new primary, a bootstrapped node) " << f.to_promotion_ms
        << " ms after the fault, the next answer came " << f.after_promotion_ms
        << " ms later; longest time without an answer " << f.longest_silence_ms << " ms; " << f.failed_attempts
        << " failed attempts retried (" << f.in_doubt << " in doubt), " << f.refused << " answered in flight; "
        << f.answered << " calls answered from a second before";
    return out.str();
}

}  // namespace idem::test
