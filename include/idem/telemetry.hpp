// idem/telemetry.hpp: decisions and log events, for metrics and logs.
//
// Every entry point (executor, inbox, HTTP, webhooks) reports each decision once, in
// Observe too (as what Enforce would have done). Log events name a record only
// by its key hash; keys and scopes never reach a sink.
//
//   auto metrics = std::make_shared<idem::metrics_sink>();
//   auto logs = std::make_shared<idem::log_sink>(std::clog);
//   idem::executor exec{store, {}, std::make_shared<idem::fanout_sink>(
//       std::vector<std::shared_ptr<idem::telemetry_sink>>{metrics, logs})};
//   serve("/metrics", metrics->render_prometheus());
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "idem/export.hpp"
#include "idem/mode.hpp"

namespace idem {

enum class entry_point { executor, inbox, http, webhook };

enum class outcome {
    executed,        // the operation ran (in Observe: a reservation was won)
    replay,          // a stored result answered the call
    key_reused,      // the key is live for other content
    in_flight,       // another run holds the key
    unscoped,        // a key arrived without a resolvable scope
    reserve_failed,  // Observe: the store failed; the operation ran without idempotency
    released,        // the key was freed: cancelled, or a result classified release
    key_missing,     // HTTP: no key where one is required
    key_invalid,     // HTTP: several keys, or one that is not a valid key
    expired,         // the key's result is gone but its remembered window holds: it did not run
};

[[nodiscard]] IDEM_API std::string_view to_string(entry_point e) noexcept;
[[nodiscard]] IDEM_API std::string_view to_string(outcome o) noexcept;

struct IDEM_API decision {
    entry_point entry;
    idem::outcome outcome;
    idem::mode mode;
    std::string_view profile;  // empty when the call named no profile
};

enum class log_level { debug, info, warning, error };
[[nodiscard]] IDEM_API std::string_view to_string(log_level level) noexcept;

// What an event is about, never the key: the entry point, the record namespace and
// profile, and over HTTP the method and route template. Empty fields are unknown.
struct IDEM_API operation_info {
    entry_point entry = entry_point::executor;
    std::string_view name_space = {};
    std::string_view profile = {};
    std::string_view method = {};
    std::string_view route = {};
};

struct IDEM_API log_event {
    log_level level;
    std::string_view name;      // stable, e.g. "idem.observe.reserve_failed"
    std::string_view key_hash;  // empty when the event names no record
    std::string_view message;
    operation_info operation = {};
};

// An outbox relay's figures (idem/outbox_relay.hpp), reported every
// relay_options::report_every: pending and dead as the table has them, the
// relay's own delivered and failed attempts since it was made, the age of
// the oldest pending message, and the messages whose id its claims found
// taken: duplicates (the same message again, delivered once) and conflicts
// (another message under a taken id, kept as a dead letter under a new id;
// each one also a log event "idem.outbox.id_conflict").
struct IDEM_API outbox_metrics {
    std::uint64_t pending = 0;
    std::uint64_t dead = 0;
    std::uint64_t delivered = 0;
    std::uint64_t failed = 0;
    std::chrono::milliseconds lag{0};
    std::uint64_t duplicates = 0;
    std::uint64_t conflicts = 0;
};

// A completer's figures (idem/completer.hpp), reported every
// completer_options::report_every: the unfinished operations in steps as the
// table has them and, of those, the ones whose lease ended (overdue: waiting
// for a completer); the completer's own runs since it was made that completed,
// compensated or failed; and how long the longest-overdue lease has been over.
struct IDEM_API completer_metrics {
    std::uint64_t unfinished = 0;
    std::uint64_t overdue = 0;
    std::uint64_t completed = 0;
    std::uint64_t compensated = 0;
    std::uint64_t failed = 0;
    std::chrono::milliseconds lag{0};
};

// Receives telemetry from many threads at once; must not throw.
class IDEM_API telemetry_sink {
public:
    virtual ~telemetry_sink() = default;
    virtual void on_decision(const decision&) noexcept {}
    virtual void on_log(const log_event&) noexcept {}
    virtual void on_outbox(const outbox_metrics&) noexcept {}
    virtual void on_completer(const completer_metrics&) noexcept {}
};

// The default: writes nothing.
[[nodiscard]] IDEM_API std::shared_ptr<telemetry_sink> null_sink();

// Counts decisions and keeps the outbox relay's and the completer's last
// figures; renders them in the Prometheus text exposition format.
class IDEM_API metrics_sink final : public telemetry_sink {
public:
    void on_decision(const decision& d) noexcept override;
    void on_outbox(const outbox_metrics& m) noexcept override;
    void on_completer(const completer_metrics& m) noexcept override;
    [[nodiscard]] std::uint64_t count(entry_point entry, outcome o, mode m, std::string_view profile = {}) const;
    // The last figures a relay reported (all zero before).
    [[nodiscard]] outbox_metrics outbox() const;
    // The last figures a completer reported (all zero before).
    [[nodiscard]] completer_metrics completer() const;
    // idem_decisions_total{entry_point="...",outcome="...",mode="...",profile="..."} N, then
    // idem_outbox_pending, _dead, _delivered_total, _failed_total, _lag_seconds, _duplicates_total,
    // _id_conflicts_total once a relay reported,
    // idem_completer_unfinished, _overdue, _completed_total, _compensated_total, _failed_total,
    // _lag_seconds once a completer reported.
    [[nodiscard]] std::string render_prometheus() const;

private:
    using labels = std::tuple<entry_point, outcome, mode, std::string>;
    mutable std::mutex mutex_;
    std::map<labels, std::uint64_t, std::less<>> counts_;
    std::optional<outbox_metrics> outbox_;
    std::optional<completer_metrics> completer_;
};

// Writes one logfmt line per event at or above `min` to a stream.
class IDEM_API log_sink final : public telemetry_sink {
public:
    explicit log_sink(std::ostream& out, log_level min = log_level::info);
    void on_log(const log_event& e) noexcept override;

private:
    std::mutex mutex_;
    std::ostream& out_;
    log_level min_;
};

// Forwards to several sinks.
class IDEM_API fanout_sink final : public telemetry_sink {
public:
    explicit fanout_sink(std::vector<std::shared_ptr<telemetry_sink>> sinks) : sinks_(std::move(sinks)) {}
    void on_decision(const decision& d) noexcept override {
        for (const auto& s : sinks_) s->on_decision(d);
    }
    void on_log(const log_event& e) noexcept override {
        for (const auto& s : sinks_) s->on_log(e);
    }
    void on_outbox(const outbox_metrics& m) noexcept override {
        for (const auto& s : sinks_) s->on_outbox(m);
    }
    void on_completer(const completer_metrics& m) noexcept override {
        for (const auto& s : sinks_) s->on_completer(m);
    }

private:
    std::vector<std::shared_ptr<telemetry_sink>> sinks_;
};

}  // namespace idem
