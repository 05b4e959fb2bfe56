// A telemetry sink that keeps everything it receives, for assertions.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "idem/telemetry.hpp"

namespace idem::test {

struct recorded_log {
    log_level level;
    std::string name;
    std::string key_hash;
    std::string message;
};

struct recorded_decision {
    entry_point entry;
    idem::outcome outcome;
    idem::mode mode;
    std::string profile;
};

class recording_sink final : public telemetry_sink {
public:
    void on_decision(const decision& d) noexcept override {
        std::lock_guard lock(mutex_);
        decisions_.push_back({d.entry, d.outcome, d.mode, std::string(d.profile)});
    }
    void on_log(const log_event& e) noexcept override {
        std::lock_guard lock(mutex_);
        logs_.push_back({e.level, std::string(e.name), std::string(e.key_hash), std::string(e.message)});
    }
    std::vector<recorded_decision> decisions() const {
        std::lock_guard lock(mutex_);
        return decisions_;
    }
    std::vector<recorded_log> logs() const {
        std::lock_guard lock(mutex_);
        return logs_;
    }
    bool logged(std::string_view name) const {
        std::lock_guard lock(mutex_);
        for (const auto& l : logs_)
            if (l.name == name) return true;
        return false;
    }
    int count(idem::outcome o, idem::mode m) const {
        std::lock_guard lock(mutex_);
        int n = 0;
        for (const auto& d : decisions_) n += d.outcome == o && d.mode == m ? 1 : 0;
        return n;
    }
    // Everything a sink was ever shown, as one text to search for leaked keys.
    std::string all_text() const {
        std::lock_guard lock(mutex_);
        std::string text;
        for (const auto& l : logs_) text += l.name + " " + l.key_hash + " " + l.message + "\n";
        for (const auto& d : decisions_) text += d.profile + "\n";
        return text;
    }

private:
    mutable std::mutex mutex_;
    std::vector<recorded_decision> decisions_;
    std::vector<recorded_log> logs_;
};

}  // namespace idem::test
