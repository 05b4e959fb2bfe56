// idem/options.hpp: modes, leases and retention, globally, per profile, per call.
//
// Each setting resolves from the call (execution_options), else its profile,
// else the executor_options. Invalid options are rejected with every invalid
// field named; an options_source can be replaced while calls run:
//
//   idem::executor_options o;
//   o.mode = idem::mode::observe;
//   o.profiles["payments"] = {.mode = idem::mode::enforce, .retention = std::chrono::days(7),
//                             .remember = std::chrono::days(90)};  // a late retry: expired, never a rerun
//   o.profiles["webhooks"].http = {.require_key = true};  // HTTP settings per profile too
//   auto source = std::make_shared<idem::options_source>(o);
//   source->replace(reloaded);  // invalid: every call throws options_error until fixed
//
// Or from a JSON file (format in docs/executor.md), read again on reload():
//
//   auto source = idem::options_source::from_json("/etc/payments/idem.json");
//   source->reload();  // invalid file: the options in force stay; options_error names every field
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/mode.hpp"
#include "idem/telemetry.hpp"

namespace idem {

class encryption_keys;  // idem/encryption.hpp

// What an HTTP key is not enough for: an unidentified caller (no scope resolves).
enum class unscoped_behavior {
    reject,  // 400 Idempotency.ScopeRequired
    bypass,  // run the endpoint without idempotency (counted as unscoped)
};

// How the HTTP layer reads a request (idem/http/layer.hpp); read on every request.
struct IDEM_API http_settings {
    std::string header_name = "Idempotency-Key";
    bool require_key = false;  // a missing key: 400 KeyMissing, or run without idempotency
    unscoped_behavior unscoped = unscoped_behavior::reject;
};

// HTTP settings of one profile (profile_options::http) or one layer
// (http::layer_options::http); an unset field is executor_options::http's. So two
// layers on one executor can differ:
//
//   o.profiles["webhooks"].http = {.require_key = true, .unscoped = idem::unscoped_behavior::bypass};
struct IDEM_API http_overrides {
    std::optional<std::string> header_name = {};
    std::optional<bool> require_key = {};
    std::optional<unscoped_behavior> unscoped = {};

    // `base` with the fields set here.
    [[nodiscard]] http_settings applied_to(http_settings base) const {
        if (header_name) base.header_name = *header_name;
        if (require_key) base.require_key = *require_key;
        if (unscoped) base.unscoped = *unscoped;
        return base;
    }
    // Every invalid field, its name prefixed by `where` ("profiles.api.http."); empty when valid.
    [[nodiscard]] std::vector<std::string> problems(const std::string& where) const;
};

// Fields have default initializers so designated initializers stay warning-free.
struct IDEM_API profile_options {
    std::optional<idem::mode> mode = {};
    std::optional<duration> lease = {};
    std::optional<duration> retention = {};
    std::optional<duration> failure_retention = {};
    std::optional<std::string> store = {};  // a store registered on the executor under this name
    http_overrides http = {};               // over executor_options::http, for layers on this profile
    // The remembered window: how long after a result is stored its key stays
    // known, longer than `retention`. Once the result is gone (retention over,
    // purged), a retry inside the window is answered execution_status::expired
    // instead of running again; after it, the key runs anew. Unset: forgotten
    // with the result. Needs a store whose traits say `remembers`.
    std::optional<duration> remember = {};
};

struct IDEM_API executor_options {
    idem::mode mode = mode::enforce;
    // How long a key stays in flight when nobody settles it (crash, exception).
    // Pick lease >= max(server request timeout, client's total retry budget).
    duration lease = std::chrono::minutes(1);
    duration max_lease = std::chrono::minutes(15);
    duration retention = std::chrono::hours(24);            // results classified store
    duration failure_retention = std::chrono::minutes(10);  // results classified store_as_failure
    std::string store = {};                                 // "" is the default store
    std::map<std::string, profile_options, std::less<>> profiles = {};
    http_settings http = {};  // each profile's `http` (and each layer's) may override fields
    // Seals every result stored from now on (idem/encryption.hpp); null: stored as the codec wrote it.
    std::shared_ptr<const encryption_keys> encryption = nullptr;

    // Every invalid field, named with why; empty when valid. Store names are
    // checked against `stores` when given.
    [[nodiscard]] std::vector<std::string> problems(const std::set<std::string, std::less<>>* stores = nullptr) const;
};

// Per call; unset fields come from the profile, then the executor_options.
struct IDEM_API execution_options {
    std::string profile = {};  // "" for none; "messaging" is built in (7-day retention)
    std::optional<idem::mode> mode = {};
    std::optional<duration> lease = {};
    std::optional<duration> retention = {};
    std::optional<duration> failure_retention = {};
    std::optional<std::string> store = {};
    // The one concurrency knob of idem::database::once() (and the entry points'
    // database forms). Unset, Enforce looks the key up, runs the work and writes
    // the completed record with COMMIT; a concurrent duplicate may then run too
    // before its transaction rolls back and replays the winner's result. Set it
    // when the work must not even start twice, e.g. it calls out (or takes a lock
    // elsewhere) before its database writes: the key is then reserved first, and
    // a duplicate waits for the first run to end.
    bool reserve_first = false;
    entry_point entry = entry_point::executor;  // which entry point telemetry counts the call under
    // What log events name the call by (never the key); they must outlive the call.
    std::string_view method = {};  // HTTP method
    std::string_view route = {};   // route template, e.g. "/accounts/{id}"
};

// The settings a call runs with.
struct IDEM_API resolved_options {
    idem::mode mode;
    duration lease;
    duration retention;
    duration failure_retention;
    std::string store;
    std::string profile;
    http_settings http;
    std::shared_ptr<const encryption_keys> encryption;
    duration remember = duration::zero();  // the profile's remembered window; zero: none
};

inline constexpr std::string_view messaging_profile = "messaging";
inline constexpr auto messaging_retention = std::chrono::hours(24 * 7);

// Thread-safe holder of the current executor_options. Calls read a snapshot;
// replace() swaps it without blocking them.
class IDEM_API options_source {
public:
    // Throws options_error when `initial` is invalid (store names checked against
    // `known_stores` when given).
    explicit options_source(executor_options initial = {},
                            std::optional<std::set<std::string, std::less<>>> known_stores = std::nullopt);

    // Options read from a JSON file; throws options_error naming every invalid or
    // unknown field (and an unreadable file or malformed JSON).
    [[nodiscard]] static std::shared_ptr<options_source> from_json(
        std::filesystem::path path, std::optional<std::set<std::string, std::less<>>> known_stores = std::nullopt);

    // Reads from_json's file again. Valid: takes effect for the next call. Invalid or
    // unreadable: the options in force stay, and options_error names every problem.
    // std::logic_error for a source not made by from_json.
    void reload();

    // Takes effect for the next call. Invalid options are kept and make every
    // call throw options_error until a valid replacement arrives.
    void replace(executor_options next);

    // The store names the options may refer to (the executor registers its own);
    // until then names are not checked.
    void set_known_stores(std::set<std::string, std::less<>> stores);

    // The current options; throws options_error while they are invalid.
    [[nodiscard]] std::shared_ptr<const executor_options> current() const;
    // Resolves a call's settings (operation, then profile, then global); throws options_error.
    [[nodiscard]] resolved_options resolve(const execution_options& call) const;

private:
    struct snapshot;
    [[nodiscard]] std::shared_ptr<const snapshot> load() const;
    void publish(std::shared_ptr<const executor_options> options,
                 std::optional<std::set<std::string, std::less<>>> stores);

    std::atomic<std::shared_ptr<const snapshot>> snapshot_;
    std::filesystem::path file_;  // from_json's file; empty otherwise
};

// Parses the JSON format options_source::from_json reads; options_error names
// every malformed, unknown or invalid field.
[[nodiscard]] IDEM_API executor_options executor_options_from_json(std::string_view json);

// "15m", "90s", "250ms": the largest unit that divides the duration exactly.
[[nodiscard]] IDEM_API std::string format_duration(duration d);

}  // namespace idem
