// idem/http/layer.hpp: the Idempotency-Key layer, independent of any server library.
// On a SQL database the endpoint runs in a unit of work and its response is
// recorded in that transaction:
//
//   idem::http::idempotency_layer layer{db.executor(), {.resolver = idem::scopes::user()}};
//   idem::http::response res = layer.handle(db, req, [&](idem::unit_of_work& uow) {
//       return create_payment(uow, req.body);  // an idem::http::response
//   });
//
// Lease mode (layer.handle(req, endpoint)), answers and live options: docs/http.md.
// What became of a key, for the caller's own scope (the reconciliation route, off
// by default; the request a GET on reconcile_path):
//
//   idem::http::idempotency_layer layer{db.executor(), {.resolver = idem::scopes::user(), .reconcile_path = "/idem"}};
//   idem::http::response state = layer.reconcile(req);  // {"state":"completed","status":201,"expires_in":86399}
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "idem/database.hpp"
#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/http/message.hpp"
#include "idem/operation.hpp"
#include "idem/operation_state.hpp"
#include "idem/operations.hpp"

namespace idem::http {

using idem::unscoped_behavior;
class response_codec;

// The layer's own settings, fixed for its life. What a request reads live is in the
// executor's options (one schema for executor, inbox and layer), resolved through
// `profile`: mode, lease, retention, failure_retention (a 5xx after the endpoint
// ran) and the HTTP settings (header_name, require_key, unscoped): executor_options::http,
// under the profile's own http fields, under this layer's `http`.
struct IDEM_API layer_options {
    std::set<std::string, std::less<>> methods = {"POST", "PATCH"};
    // Who owns a key. Null: every caller shares one key space (scope::global()).
    scope_resolver resolver = nullptr;
    std::string name_space = "http";
    std::string profile = {};                   // the profile the layer's calls resolve through ("" for none)
    std::size_t max_stored_body = 1024 * 1024;  // larger responses are sent, not stored
    std::chrono::seconds retry_after = std::chrono::seconds(1);
    // The database form's concurrency knob (execution_options::reserve_first): reserve
    // the key before the endpoint runs, so a concurrent duplicate never starts it.
    bool reserve_first = false;
    // Response headers replayed with the body (Set-Cookie never is).
    std::vector<std::string> replayed_headers = {
        "Content-Type", "Content-Language", "Content-Location", "Location", "ETag", "Last-Modified",
        "Link",         "Cache-Control"};
    // HTTP settings of this layer alone, over its profile's and the executor's (which
    // stay live for the fields left unset): two layers on one executor can differ.
    http_overrides http = {};
    // Lease mode: a 5xx the endpoint answered (503 and 504 aside, whose effects are
    // unknown) frees the key instead of being kept for failure_retention, so a retry
    // runs the endpoint again. For endpoints whose 5xx means nothing was done.
    bool release_server_errors = false;
    // The reconciliation route, GET on this path ("/idempotency"; empty: none): what
    // became of the key in the request's key header, for the caller's own scope
    // (reconcile()). serve_reconciliation (idem/http/httplib.hpp) registers it.
    std::string reconcile_path = {};
    // Whether its answer carries a completed record's stored headers and body too.
    bool reconcile_body = false;
    // Edits the copy of a response the record keeps, never the one sent: the
    // first caller gets the endpoint's response, every replay (and the
    // reconciliation route) the edited one. For what a replay need not repeat: a
    // card number, a one-time secret. Null: stored as sent. Keep the status (a
    // replay answers the stored one). It runs after the response is classified;
    // what it returns must still be storable (std::invalid_argument otherwise).
    // A layer per endpoint (they share the executor) redacts per endpoint.
    std::function<void(response& stored)> redact = nullptr;
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
    // A layer with a store and an options source of its own, filled from `live`.
    // Invalid options (lease above 15 minutes or above retention, non-positive spans,
    // no methods) throw options_error naming every invalid field. source() replaces
    // the live ones.
    idempotency_layer(std::shared_ptr<record_store> store, executor_options live = {}, layer_options options = {},
                      std::shared_ptr<telemetry_sink> telemetry = nullptr);
    // A layer on `exec`'s stores, options source and telemetry (`exec` must outlive it).
    explicit idempotency_layer(executor& exec, layer_options options = {});
    ~idempotency_layer();
    idempotency_layer(const idempotency_layer&) = delete;
    idempotency_layer& operator=(const idempotency_layer&) = delete;

    // In a unit of work of `db`: endpoint(unit_of_work&) -> response (or
    // endpoint(unit_of_work&, const admission&), to see what the layer admitted) runs
    // at most once per key, and its response is recorded in the same transaction.
    // - Below 400 the endpoint's writes commit with the record; a retry gets the replay.
    // - 400 and above roll the endpoint's writes back: a refusal leaves nothing behind.
    //   A final 4xx is then recorded in a transaction of its own, so a retry gets it
    //   again; 408, 409, 425, 429 and 5xx are not, and the key is free at once.
    // - A concurrent duplicate waits for the first transaction and gets its replay.
    // - A response that cannot be recorded (streamed, above max_stored_body) rolls the
    //   writes back and answers 500 Idempotency.ResponseNotStored.
    // - A unit of work that failed and rolled back answers 503 Idempotency.RolledBack
    //   with Retry-After; one whose COMMIT went unanswered answers 503
    //   Idempotency.InDoubt (the record shares its fate: a retry replays what
    //   committed, or runs). An exception from the endpoint rolls back and propagates.
    // Observe and Off run the endpoint for every request, as with no layer.
    template <class Endpoint>
    requires(!std::derived_from<std::remove_cvref_t<Endpoint>, any_operation>) response
        handle(database& db, const request& req, Endpoint&& endpoint) {
        return handle(db, req, settings(), std::forward<Endpoint>(endpoint));
    }
    template <class Endpoint>
    response handle(database& db, const request& req, const resolved_options& live, Endpoint&& endpoint) {
        auto run = [&](unit_of_work& uow, const admission& a) -> response {
            if constexpr (std::is_invocable_v<Endpoint&, unit_of_work&, const admission&>)
                return endpoint(uow, a);
            else
                return endpoint(uow);
        };
        auto unkeyed = [&](const admission& a) {
            return db.transact([&](unit_of_work& uow) { return run(uow, a); },
                               [](const response& r) { return commits(r); });
        };
        auto keyed = [&](const admission& a, const execution_options& call, const result_codec<response>& codec) {
            return db.once(
                *a.key, a.fingerprint, [&](unit_of_work& uow) { return run(uow, a); }, codec, call);
        };
        auto record = [&](const admission& a, const execution_options& call, const response& refusal) {
            return db.once(
                *a.key, a.fingerprint, [&](unit_of_work&) { return refusal; }, recorded_codec(), call);
        };
        return handle_in_unit(req, live, {unkeyed, keyed, record});
    }

    // An endpoint in steps: the operation (idem/operation.hpp, its codec
    // operation_codec()) runs at most once per key, its record key in the
    // operation's namespace, the request's body its input (op.input(), what
    // the completer runs it on too: an operation reads nothing else of the
    // request). The answer:
    // - the operation finished within the request: its final response; a
    //   retry gets it again (Idempotent-Replayed: true);
    // - it is unfinished (a step or call failed, another run holds it, the
    //   completer finishes or compensates it): 202 with its state as JSON
    //   (state, recovery point, steps, completer runs) and Retry-After; a retry
    //   with the same key gets the final response once there is one;
    // - another request's key: 422 Idempotency.KeyReused; no key, an invalid
    //   one or no scope: 400, in every mode (an operation in steps needs its
    //   key; Observe and Off do not apply);
    // - the database is down before the operation began: 503 with Retry-After.
    // A changed shape (steps_shape_changed) propagates.
    response handle(database& db, const request& req, const operation<response>& op) {
        const resolved_options live = settings();
        const admission a = admit_steps(req, op.name_space());
        if (a.answer) return *a.answer;
        auto run = [&] { return op.run(db, *a.key, a.fingerprint, req.body, call_options(req, live)); };
        auto state = [&] { return inspect_operation(db, *a.key); };
        return handle_steps(req, a, run, state);
    }

    // The codec of an operation that answers requests (idem::operation<response>):
    // the layer's stored form (status, replayed_headers, the exact body), every
    // final response kept for the retention: an operation's answer is final.
    [[nodiscard]] std::shared_ptr<const result_codec<response>> operation_codec() const;

    // Lease mode: runs `endpoint` (response()) at most once per key, or answers for it;
    // the record is written before and after it, outside any transaction of the
    // endpoint's. An exception from the endpoint propagates and keeps the key in
    // flight until the lease ends. In Observe the endpoint runs for every request,
    // exactly as in Off: what Enforce would have answered (400, a replay, 409, 422)
    // is counted and logged, never sent.
    template <class Endpoint>
    response handle(const request& req, Endpoint&& endpoint) {
        return handle(req, settings(), std::forward<Endpoint>(endpoint));
    }
    // The same with the settings an adapter read to find the key header (settings()),
    // so the whole request sees one snapshot of them.
    template <class Endpoint>
    response handle(const request& req, const resolved_options& live, Endpoint&& endpoint) {
        idem::detail::function_ref<response()> run(endpoint);
        return handle_erased(req, live, run);
    }

    // What handle() admits for a request: the key and fingerprint, a 400 to send
    // instead, or neither (run without idempotency).
    [[nodiscard]] admission admit(const request& req) const;

    // The reconciliation route's answer: what became of the key in the request's key
    // header, in the namespace and scope a POST from the same caller would use
    // (`req.key_headers`, `req.caller`; nothing else of the request is read). 200
    // application/json, Cache-Control: no-store:
    //   {"state":"absent"}                          no live record (or another scope's)
    //   {"state":"in_flight","expires_in":41}       a run holds it; seconds to the lease's end
    //   {"state":"completed","status":201,"expires_in":86399}
    //                                               a retry of the request gets this status
    //                                               replayed, until the record expires
    // With reconcile_body, a completed answer also has "headers" (the stored,
    // allow-listed ones, as [name, value] pairs) and "body" (UTF-8 text) or
    // "body_base64url". Whatever the mode and require_key: no key 400 KeyMissing,
    // an invalid one 400 KeyInvalid, no scope 400 ScopeRequired. A store that is no
    // record_inspector (every built-in store is one): 501 Idempotency.LookupUnsupported;
    // a store that is down: 503 StoreUnavailable with Retry-After.
    [[nodiscard]] response reconcile(const request& req) const;

    // Whether the database form commits what the endpoint wrote for this response.
    [[nodiscard]] static bool commits(const response& r) noexcept { return r.status < 400; }

    // The fixed options; the live ones are in source().
    [[nodiscard]] const layer_options& options() const noexcept { return options_; }
    [[nodiscard]] options_source& source() const noexcept { return executor_.options(); }
    // The mode and header settings a request arriving now reads.
    [[nodiscard]] resolved_options settings() const;

private:
    // The database form's three ways to run a request, for handle_in_unit.
    struct unit_calls {
        idem::detail::function_ref<response(const admission&)> unkeyed;
        idem::detail::function_ref<execution<response>(const admission&, const execution_options&,
                                                       const result_codec<response>&)>
            keyed;
        idem::detail::function_ref<execution<response>(const admission&, const execution_options&, const response&)>
            record;
    };

    idempotency_layer(std::unique_ptr<executor> owned, layer_options&& options);
    response handle_erased(const request& req, const resolved_options& live,
                           idem::detail::function_ref<response()> endpoint);
    response handle_in_unit(const request& req, const resolved_options& live, unit_calls calls);
    // The steps form's key: the operation's namespace, and a 400 in every mode without one.
    [[nodiscard]] admission admit_steps(const request& req, std::string_view name_space) const;
    response handle_steps(const request& req, const admission& a, idem::detail::function_ref<execution<response>()> run,
                          idem::detail::function_ref<std::optional<operation_state>()> state);
    // 202 with the operation's state and Retry-After.
    [[nodiscard]] response in_progress(const operation_state& s) const;
    [[nodiscard]] response answer(execution<response>&& e) const;
    [[nodiscard]] execution_options call_options(const request& req, const resolved_options& live) const;
    [[nodiscard]] const result_codec<response>& in_unit_codec_for(idem::mode m) const noexcept;
    [[nodiscard]] const result_codec<response>& recorded_codec() const noexcept;
    void log_observed(const request& req, const admission& a, const execution<response>& e) const;
    [[nodiscard]] admission admit(const request& req, const resolved_options& live) const;
    // Counts and logs a decision the layer makes before the executor runs.
    void report(const request& req, outcome o, idem::mode m, log_level level, std::string_view event,
                std::string_view message) const;
    [[nodiscard]] operation_info about(const request& req) const;  // what log events name

    std::unique_ptr<executor> owned_;  // null when the layer shares an executor
    executor& executor_;
    layer_options options_;
    std::unique_ptr<const response_codec> codec_;  // lease mode, and recorded refusals
    // The database form's endpoint, in Enforce and in Observe or Off.
    std::unique_ptr<const result_codec<response>> enforcing_codec_;
    std::unique_ptr<const result_codec<response>> observing_codec_;
};

}  // namespace idem::http
