#include "idem/telemetry.hpp"

#include <chrono>
#include <ostream>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace idem {
namespace {

enum class format { prometheus, logfmt };

// Quote, backslash and newline escaped (the only escapes Prometheus label values
// have); in logfmt carriage returns too, so a logged message never starts a line
// of its own in a reader that splits on them.
std::string escaped(std::string_view text, format f = format::prometheus) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        if (c == '\r' && f == format::logfmt) {
            out += "\\r";
            continue;
        }
        out += c;
    }
    return out;
}

}  // namespace

std::string_view to_string(entry_point e) noexcept {
    switch (e) {
        case entry_point::executor: return "executor";
        case entry_point::inbox: return "inbox";
        case entry_point::http: return "http";
        case entry_point::webhook: return "webhook";
    }
    return "unknown";
}

std::string_view to_string(outcome o) noexcept {
    switch (o) {
        case outcome::executed: return "executed";
        case outcome::replay: return "replay";
        case outcome::key_reused: return "key_reused";
        case outcome::expired: return "expired";
        case outcome::in_flight: return "in_flight";
        case outcome::unscoped: return "unscoped";
        case outcome::reserve_failed: return "reserve_failed";
        case outcome::released: return "released";
        case outcome::key_missing: return "key_missing";
        case outcome::key_invalid: return "key_invalid";
    }
    return "unknown";
}

std::string_view to_string(log_level level) noexcept {
    switch (level) {
        case log_level::debug: return "debug";
        case log_level::info: return "info";
        case log_level::warning: return "warning";
        case log_level::error: return "error";
    }
    return "unknown";
}

std::shared_ptr<telemetry_sink> null_sink() {
    static const auto instance = std::make_shared<telemetry_sink>();
    return instance;
}

void metrics_sink::on_decision(const decision& d) noexcept {
    try {
        std::lock_guard lock(mutex_);
        ++counts_[labels{d.entry, d.outcome, d.mode, std::string(d.profile)}];
    } catch (...) {
        // Out of memory while counting: the decision stands, the count is lost.
    }
}

std::uint64_t metrics_sink::count(entry_point entry, outcome o, mode m, std::string_view profile) const {
    std::lock_guard lock(mutex_);
    auto it = counts_.find(labels{entry, o, m, std::string(profile)});
    return it == counts_.end() ? 0 : it->second;
}

std::string metrics_sink::render_prometheus() const {
    std::string out =
        "# HELP idem_decisions_total Idempotency decisions by entry point, outcome, mode and profile.\n"
        "# TYPE idem_decisions_total counter\n";
    std::lock_guard lock(mutex_);
    for (const auto& [l, n] : counts_) {
        const auto& [entry, o, m, profile] = l;
        out += fmt::format("idem_decisions_total{{entry_point=\"{}\",outcome=\"{}\",mode=\"{}\",profile=\"{}\"}} {}\n",
                           to_string(entry), to_string(o), to_string(m), escaped(profile), n);
    }
    if (outbox_) {
        const outbox_metrics& m = *outbox_;
        out += fmt::format(
            "# HELP idem_outbox_pending Outbox messages not yet delivered.\n# TYPE idem_outbox_pending gauge\n"
            "idem_outbox_pending {}\n"
            "# HELP idem_outbox_dead Outbox messages dead-lettered.\n# TYPE idem_outbox_dead gauge\n"
            "idem_outbox_dead {}\n"
            "# HELP idem_outbox_delivered_total Messages this relay delivered.\n"
            "# TYPE idem_outbox_delivered_total counter\nidem_outbox_delivered_total {}\n"
            "# HELP idem_outbox_failed_total Deliveries of this relay that failed.\n"
            "# TYPE idem_outbox_failed_total counter\nidem_outbox_failed_total {}\n"
            "# HELP idem_outbox_lag_seconds Age of the oldest pending message.\n"
            "# TYPE idem_outbox_lag_seconds gauge\nidem_outbox_lag_seconds {:.3f}\n"
            "# HELP idem_outbox_duplicates_total Messages this relay's claims found published twice under one id.\n"
            "# TYPE idem_outbox_duplicates_total counter\nidem_outbox_duplicates_total {}\n"
            "# HELP idem_outbox_id_conflicts_total Messages this relay's claims found under an id another message "
            "had: dead-lettered under a new id.\n"
            "# TYPE idem_outbox_id_conflicts_total counter\nidem_outbox_id_conflicts_total {}\n",
            m.pending, m.dead, m.delivered, m.failed, std::chrono::duration<double>(m.lag).count(), m.duplicates,
            m.conflicts);
    }
    if (completer_) {
        const completer_metrics& m = *completer_;
        out += fmt::format(
            "# HELP idem_completer_unfinished Operations in steps not finished.\n"
            "# TYPE idem_completer_unfinished gauge\nidem_completer_unfinished {}\n"
            "# HELP idem_completer_overdue Unfinished operations whose lease ended.\n"
            "# TYPE idem_completer_overdue gauge\nidem_completer_overdue {}\n"
            "# HELP idem_completer_completed_total Operations this completer completed.\n"
            "# TYPE idem_completer_completed_total counter\nidem_completer_completed_total {}\n"
            "# HELP idem_completer_compensated_total Operations this completer compensated.\n"
            "# TYPE idem_completer_compensated_total counter\nidem_completer_compensated_total {}\n"
            "# HELP idem_completer_failed_total Runs of this completer that failed.\n"
            "# TYPE idem_completer_failed_total counter\nidem_completer_failed_total {}\n"
            "# HELP idem_completer_lag_seconds How long the longest-overdue operation's lease has been over.\n"
            "# TYPE idem_completer_lag_seconds gauge\nidem_completer_lag_seconds {:.3f}\n",
            m.unfinished, m.overdue, m.completed, m.compensated, m.failed,
            std::chrono::duration<double>(m.lag).count());
    }
    return out;
}

void metrics_sink::on_outbox(const outbox_metrics& m) noexcept {
    std::lock_guard lock(mutex_);
    outbox_ = m;
}

outbox_metrics metrics_sink::outbox() const {
    std::lock_guard lock(mutex_);
    return outbox_.value_or(outbox_metrics{});
}

void metrics_sink::on_completer(const completer_metrics& m) noexcept {
    std::lock_guard lock(mutex_);
    completer_ = m;
}

completer_metrics metrics_sink::completer() const {
    std::lock_guard lock(mutex_);
    return completer_.value_or(completer_metrics{});
}

log_sink::log_sink(std::ostream& out, log_level min) : out_(out), min_(min) {}

void log_sink::on_log(const log_event& e) noexcept {
    if (e.level < min_) return;
    try {
        const auto now = std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
        std::string line = fmt::format("ts={:%Y-%m-%dT%H:%M:%S}Z level={} event={}", now, to_string(e.level), e.name);
        if (!e.key_hash.empty()) line += fmt::format(" key_hash={}", e.key_hash);
        line += fmt::format(" msg=\"{}\"", escaped(e.message, format::logfmt));
        const operation_info& op = e.operation;
        line += fmt::format(" entry_point={}", to_string(op.entry));
        const std::pair<std::string_view, std::string_view> fields[] = {
            {"namespace", op.name_space}, {"profile", op.profile}, {"method", op.method}, {"route", op.route}};
        for (const auto& [label, value] : fields)
            if (!value.empty()) line += fmt::format(" {}=\"{}\"", label, escaped(value, format::logfmt));
        line += '\n';
        std::lock_guard lock(mutex_);
        out_ << line << std::flush;
    } catch (...) {
        // A failing log stream must not fail the operation that logged.
    }
}

}  // namespace idem
