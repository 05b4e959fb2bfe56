// idem/http/layer.hpp: the Idempotency-Key layer, independent of any server library.
//
// Wrap an endpoint: the first request with a key runs it; a retry with the same
// key and content gets the stored response (Idempotent-Replayed: true); other
// content gets 422, a retry while the first still runs gets 409 with Retry-After.
//
//   idem::http::idempotency_layer layer{store, {.resolver = idem::scopes::user()}};
//   idem::http::response res = layer.handle(req, [&] { return create_payment(req); });
//
// The layer runs in lease mode: the record is written outside the endpoint's
// own transaction. An adapter for cpp-httplib is in idem/http/httplib.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/http/message.hpp"

namespace idem::http {

using idem::unscoped_behavior;

// Fields marked [live] are read on every request from an options source: the layer's
// own (filled from these fields), or, for a layer built on an executor, the executor's
// (the mode and durations through `profile`, the others from executor_options::http),
// where these fields are unused and one replace() switches executor, inbox and layer.
struct IDEM_API layer_options {
    std::string header_name = "Idempotency-Key";  // [live]
    std::set<std::string, std::less<>> methods = {"POST", "PATCH"};
    bool require_key = false;  // [live] a missing key: 400 KeyMissing, or run without idempotency
    // Who owns a key. Null: every caller shares one key space (scope::global()).
    scope_resolver resolver = nullptr;
    unscoped_behavior unscoped = unscoped_behavior::reject;  // [live]
    std::string name_space = "http";
    std::string profile = {};         // the profile the layer's calls resolve through ("" for none)
    idem::mode mode = mode::enforce;  // [live]
    // [live] How long a request holds its key when nobody settles it (crash, 503, exception).
    duration lease = std::chrono::minutes(1);
    duration retention = std::chrono::hours(24);                // [live]
    duration server_error_retention = std::chrono::minutes(5);  // [live] a 5xx after the endpoint ran
    std::size_t max_stored_body = 1024 * 1024;                  // larger responses are sent, not stored
    std::chrono::seconds retry_after = std::chrono::seconds(1);
    // Response headers replayed with the body (Set-Cookie never is).
    std::vector<std::string> replayed_headers = {
        "Content-Type", "Content-Language", "Content-Location", "Location", "ETag", "Last-Modified",
        "Link",         "Cache-Control"};
};

// What the layer decided before running anything.
struct IDEM_API admission {
    std::optional<response> answer = {};  // a 400 to send instead of running the endpoint
    std::optional<record_key> key = {};   // set when the request is idempotent
    std::string fingerprint = {};         // of the request, when `key` is set
    // Neither set: run the endpoint without idempotency (no key, method not covered, off).
};

class IDEM_API idempotency_layer {
public:
    // A layer with a store and options of its own. Invalid options (lease above 15 minutes
    // or above retention, non-positive spans, no methods) throw options_error naming every
    // invalid field. source() replaces them live.
    idempotency_layer(std::shared_ptr<record_store> store, layer_options options = {},
                      std::shared_ptr<telemetry_sink> telemetry = nullptr);
    // A layer on `exec`'s stores, options source and telemetry (`exec` must outlive it):
    // of `options` only methods, resolver, name_space, profile, max_stored_body,
    // retry_after and replayed_headers are used; the rest comes from the source.
    explicit idempotency_layer(executor& exec, layer_options options = {});

    // Runs `endpoint` (response()) at most once per key, or answers for it. An exception
    // from the endpoint propagates and keeps the key in flight until the lease ends.
    // In Observe the endpoint runs for every request, exactly as in Off: what Enforce
    // would have answered (400, a replay, 409, 422) is counted and logged, never sent.
    template <class Endpoint>
    response handle(const request& req, Endpoint&& endpoint) {
        return handle(req, settings(), std::forward<Endpoint>(endpoint));
    }
    // The same with the settings an adapter read to find the key header (settings()),
    // so the whole request sees one snapshot of them.
    template <class Endpoint>
    response handle(const request& req, const resolved_options& live, Endpoint&& endpoint) {
        detail::function_ref<response()> run(endpoint);
        return handle_erased(req, live, run);
    }

    // The steps of handle(), for endpoints that run the executor themselves
    // (inside a transaction): parse the key, resolve the scope, fingerprint.
    [[nodiscard]] admission admit(const request& req) const;
    // The response for an execution: the live one, a replay, 409 or 422.
    [[nodiscard]] response answer(execution<response>&& e) const;

    // The fixed options; the live ones are in source().
    [[nodiscard]] const layer_options& options() const noexcept { return options_; }
    [[nodiscard]] options_source& source() const noexcept { return executor_.options(); }
    // The mode and header settings a request arriving now reads.
    [[nodiscard]] resolved_options settings() const;

private:
    idempotency_layer(std::unique_ptr<executor> owned, layer_options&& options);
    response handle_erased(const request& req, const resolved_options& live, detail::function_ref<response()> endpoint);
    [[nodiscard]] admission admit(const request& req, const resolved_options& live) const;
    // Counts and logs a decision the layer makes before the executor runs.
    void report(const request& req, outcome o, idem::mode m, log_level level, std::string_view event,
                std::string_view message) const;
    [[nodiscard]] operation_info about(const request& req) const;  // what log events name

    std::unique_ptr<executor> owned_;  // null when the layer shares an executor
    executor& executor_;
    layer_options options_;
    std::unique_ptr<const result_codec<response>> codec_;
};

}  // namespace idem::http
