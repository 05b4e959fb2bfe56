#include "idem/http/layer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "idem/encryption.hpp"
#include "idem/http/fingerprint.hpp"
#include "idem/http/key_header.hpp"
#include "idem/http/problem.hpp"
#include "idem/http/response_codec.hpp"
#include "idem/store_admin.hpp"
#include "internal/crypto.hpp"
#include "internal/decision_outcome.hpp"
#include "internal/text.hpp"

namespace idem::http {
namespace {

// The options a layer never reloads.
std::vector<std::string> fixed_problems(const layer_options& o) {
    std::vector<std::string> problems;
    if (o.methods.empty()) problems.emplace_back("methods is empty");
    if (o.max_stored_body == 0) problems.emplace_back("max_stored_body must be positive");
    if (o.retry_after.count() < 0) problems.emplace_back("retry_after must not be negative");
    try {
        (void)record_key(o.name_space, "probe");
    } catch (const std::invalid_argument&) {
        problems.emplace_back("name_space must be non-empty UTF-8 of at most 256 bytes");
    }
    for (auto& p : o.http.problems("http.")) problems.push_back(std::move(p));
    if (!o.reconcile_path.empty() && o.reconcile_path.front() != '/')
        problems.emplace_back("reconcile_path must be empty or start with /");
    return problems;
}

void require_valid(std::vector<std::string> problems) {
    if (!problems.empty()) throw options_error(std::move(problems));
}

// A standalone layer's live options as an options source of its own.
std::shared_ptr<options_source> source_for(executor_options live, const layer_options& o) {
    if (!o.profile.empty()) live.profiles.try_emplace(o.profile);
    std::vector<std::string> problems = live.problems();
    for (auto& p : fixed_problems(o)) problems.push_back(std::move(p));
    require_valid(std::move(problems));
    return std::make_shared<options_source>(std::move(live), std::set<std::string, std::less<>>{""});
}

response with_retry_after(response r, std::chrono::seconds after) {
    r.set_header("Retry-After", std::to_string(after.count()));
    return r;
}

const problem_code& problem_for(execution_status s) {
    if (s == execution_status::expired) return codes::expired;
    return s == execution_status::in_flight ? codes::in_flight : codes::key_reused;
}

// The database form's codec: the layer's stored form, classified for a unit of
// work, where release rolls the transaction back and records nothing. Enforce
// commits only what it can record (below 400, storable). Observe and Off commit
// what the endpoint would commit with no layer (below 400); a response Observe
// cannot store keeps its detached reservation until the lease ends instead.
class in_unit_codec final : public result_codec<response> {
public:
    in_unit_codec(const layer_options& options, bool enforcing) : stored_(options), enforcing_(enforcing) {}
    [[nodiscard]] std::string serialize(const response& r) const override { return stored_.serialize(r); }
    [[nodiscard]] response deserialize(std::string_view payload) const override { return stored_.deserialize(payload); }
    [[nodiscard]] classification classify(const response& r) const override {
        if (!idempotency_layer::commits(r)) return classification::release;
        if (stored_.storable(r)) return classification::store;
        return enforcing_ ? classification::release : classification::keep_in_flight;
    }

private:
    response_codec stored_;
    bool enforcing_;
};

// An operation's final response, in the layer's stored form, kept for the
// retention whatever its status: its effects are committed, its answer final.
class operation_response_codec final : public result_codec<response> {
public:
    explicit operation_response_codec(const layer_options& options) : stored_(options) {}
    [[nodiscard]] std::string serialize(const response& r) const override { return stored_.serialize(r); }
    [[nodiscard]] response deserialize(std::string_view payload) const override { return stored_.deserialize(payload); }

private:
    response_codec stored_;
};

}  // namespace

idempotency_layer::idempotency_layer(std::shared_ptr<record_store> store, executor_options live, layer_options options,
                                     std::shared_ptr<telemetry_sink> telemetry)
    : idempotency_layer(std::make_unique<executor>(executor::store_map{{"", std::move(store)}},
                                                   source_for(std::move(live), options), std::move(telemetry)),
                        std::move(options)) {}

idempotency_layer::idempotency_layer(executor& exec, layer_options options)
    : executor_(exec),
      options_(std::move(options)),
      codec_(std::make_unique<response_codec>(options_)),
      enforcing_codec_(std::make_unique<in_unit_codec>(options_, true)),
      observing_codec_(std::make_unique<in_unit_codec>(options_, false)) {
    require_valid(fixed_problems(options_));
}

idempotency_layer::idempotency_layer(std::unique_ptr<executor> owned, layer_options&& options)
    : owned_(std::move(owned)),
      executor_(*owned_),
      options_(std::move(options)),
      codec_(std::make_unique<response_codec>(options_)),
      enforcing_codec_(std::make_unique<in_unit_codec>(options_, true)),
      observing_codec_(std::make_unique<in_unit_codec>(options_, false)) {}

idempotency_layer::~idempotency_layer() = default;

resolved_options idempotency_layer::settings() const {
    resolved_options live = source().resolve({.profile = options_.profile});
    live.http = options_.http.applied_to(std::move(live.http));
    return live;
}

admission idempotency_layer::admit(const request& req) const {
    return admit(req, settings());
}

admission idempotency_layer::admit(const request& req, const resolved_options& live) const {
    if (live.mode == mode::off || !options_.methods.contains(req.method)) return {};
    const bool enforce = live.mode == mode::enforce;
    const parsed_key parsed = parse_key_header(req.key_headers);
    if (parsed.state == key_state::missing) {
        if (!live.http.require_key) return {};
        report(req, outcome::key_missing, live.mode, log_level::info, "idem.http.key_missing",
               "a request without a key where one is required");
        return enforce ? admission{.answer = problem(codes::key_missing)} : admission{};
    }
    if (parsed.state == key_state::invalid) {
        report(req, outcome::key_invalid, live.mode, log_level::info, "idem.http.key_invalid",
               "a request with several keys or an invalid one");
        return enforce ? admission{.answer = problem(codes::key_invalid)} : admission{};
    }
    std::optional<scope> owner = options_.resolver ? options_.resolver(req.caller) : scope::global();
    if (!owner) {
        report(req, outcome::unscoped, live.mode, log_level::warning, "idem.http.unscoped",
               "a key arrived without an identified caller");
        if (enforce && live.http.unscoped == unscoped_behavior::reject)
            return {.answer = problem(codes::scope_required)};
        return {};
    }
    return {.key = record_key(options_.name_space, std::move(*owner), parsed.key),
            .fingerprint = request_fingerprint(req.method, req.target, req.body, req.parts)};
}

response idempotency_layer::answer(execution<response>&& e) const {
    switch (e.status()) {
        case execution_status::executed: return std::move(e).value();
        case execution_status::replayed: {
            response r = std::move(e).value();
            r.set_header("Idempotent-Replayed", "true");
            return r;
        }
        case execution_status::in_flight: return with_retry_after(problem(codes::in_flight), options_.retry_after);
        case execution_status::key_reused: return problem(codes::key_reused);
        case execution_status::expired: return problem(problem_for(e.status()));
    }
    return problem(codes::key_reused);
}

operation_info idempotency_layer::about(const request& req) const {
    return {entry_point::http, options_.name_space, options_.profile, req.method, req.route};
}

void idempotency_layer::report(const request& req, outcome o, idem::mode m, log_level level, std::string_view event,
                               std::string_view message) const {
    telemetry_sink& sink = executor_.telemetry();
    sink.on_decision({entry_point::http, o, m, options_.profile});
    const std::string text =
        m == mode::enforce ? std::string(message) : fmt::format("{}; Observe let it through", message);
    sink.on_log({level, event, {}, text, about(req)});
}

execution_options idempotency_layer::call_options(const request& req, const resolved_options& live) const {
    return {.profile = options_.profile,
            .mode = live.mode,
            .reserve_first = options_.reserve_first,
            .entry = entry_point::http,
            .method = req.method,
            .route = req.route};
}

const result_codec<response>& idempotency_layer::recorded_codec() const noexcept {
    return *codec_;
}

const result_codec<response>& idempotency_layer::in_unit_codec_for(idem::mode m) const noexcept {
    return m == mode::enforce ? *enforcing_codec_ : *observing_codec_;
}

void idempotency_layer::log_observed(const request& req, const admission& a, const execution<response>& e) const {
    if (e.mode() != mode::observe || e.enforce_decision() == execution_status::executed) return;
    const std::string would =
        e.enforce_decision() == execution_status::replayed
            ? std::string("a replay of the stored response")
            : fmt::format("{} {}", problem_for(e.enforce_decision()).status, problem_for(e.enforce_decision()).code);
    executor_.telemetry().on_log({log_level::info, "idem.observe.would_answer", a.key->key_hash(),
                                  fmt::format("Enforce would have answered {}; Observe ran the endpoint", would),
                                  about(req)});
}

response idempotency_layer::handle_erased(const request& req, const resolved_options& live,
                                          detail::function_ref<response()> endpoint) {
    // One snapshot per request: the mode it answers in is the mode it began in.
    admission a = admit(req, live);
    if (a.answer) return std::move(*a.answer);
    if (!a.key) return endpoint();
    bool started = false;
    auto run = [&] {
        started = true;
        return endpoint();
    };
    try {
        execution<response> e = executor_.execute(*a.key, a.fingerprint, call_options(req, live), run, *codec_);
        log_observed(req, a, e);
        return answer(std::move(e));
    } catch (const error& e) {
        // A failure the endpoint's transaction undid (the executor freed the key): retry now.
        if (started && e.rolled_back()) return with_retry_after(problem(codes::rolled_back), options_.retry_after);
        if (started) throw;  // the endpoint's own failure: its outcome is unknown
        if (dynamic_cast<const store_error*>(&e) == nullptr) throw;
        return with_retry_after(problem(codes::store_unavailable), options_.retry_after);
    }
}

response idempotency_layer::handle_in_unit(const request& req, const resolved_options& live, unit_calls calls) {
    admission a = admit(req, live);
    if (a.answer) return std::move(*a.answer);
    try {
        if (!a.key) return calls.unkeyed(a);
        const execution_options call = call_options(req, live);
        execution<response> e = calls.keyed(a, call, in_unit_codec_for(live.mode));
        log_observed(req, a, e);
        if (e.status() == execution_status::executed && e.mode() != mode::off) {
            const response& r = e.value();
            if (e.mode() == mode::enforce && commits(r) && !codec_->storable(r)) {
                executor_.telemetry().on_log(
                    {log_level::error, "idem.http.response_not_stored", a.key->key_hash(),
                     "the response cannot be recorded (streamed, or above max_stored_body); the unit of work "
                     "rolled back",
                     about(req)});
                return problem(codes::response_not_stored);
            }
            // A final refusal rolled back what the endpoint wrote; record it on its own, so a
            // retry gets it again (or, if a duplicate committed meanwhile, the duplicate's answer).
            if (!commits(r) && codec_->classify(r) == classification::store) return answer(calls.record(a, call, r));
        }
        return answer(std::move(e));
    } catch (const transaction_in_doubt&) {
        // The record shares the transaction's fate: a retry replays what committed, or runs.
        return with_retry_after(problem(codes::in_doubt), options_.retry_after);
    } catch (const error& e) {
        if (e.rolled_back()) return with_retry_after(problem(codes::rolled_back), options_.retry_after);
        if (dynamic_cast<const store_error*>(&e) == nullptr) throw;
        return with_retry_after(problem(codes::store_unavailable), options_.retry_after);
    }
}

}  // namespace idem::http

namespace idem::http {

std::shared_ptr<const result_codec<response>> idempotency_layer::operation_codec() const {
    return std::make_shared<const operation_response_codec>(options_);
}

admission idempotency_layer::admit_steps(const request& req, std::string_view name_space) const {
    // Counted and logged as admit() does; an operation in steps always enforces.
    const parsed_key parsed = parse_key_header(req.key_headers);
    if (parsed.state == key_state::missing) {
        report(req, outcome::key_missing, mode::enforce, log_level::info, "idem.http.key_missing",
               "a request without a key where one is required");
        return {.answer = problem(codes::key_missing)};
    }
    if (parsed.state == key_state::invalid) {
        report(req, outcome::key_invalid, mode::enforce, log_level::info, "idem.http.key_invalid",
               "a request with several keys or an invalid one");
        return {.answer = problem(codes::key_invalid)};
    }
    std::optional<scope> owner = options_.resolver ? options_.resolver(req.caller) : scope::global();
    if (!owner) {
        report(req, outcome::unscoped, mode::enforce, log_level::warning, "idem.http.unscoped",
               "a key arrived without an identified caller");
        return {.answer = problem(codes::scope_required)};
    }
    return {.key = record_key(std::string(name_space), std::move(*owner), parsed.key),
            .fingerprint = request_fingerprint(req.method, req.target, req.body, req.parts)};
}

response idempotency_layer::in_progress(const operation_state& s) const {
    nlohmann::json steps = nlohmann::json::array();
    for (const operation_step& step : s.steps)
        steps.push_back({{"name", step.name},
                         {"kind", step.call ? "call" : "step"},
                         {"stored", step.answered},
                         {"attempts", step.attempts},
                         {"compensation", step.compensation}});
    response r;
    r.status = 202;
    r.body = nlohmann::json{{"state", to_string(s.phase)},
                            {"recovery_point", s.recovery_point},
                            {"completer_runs", s.completions},
                            {"steps", std::move(steps)}}
                 .dump();
    r.set_header("Content-Type", "application/json");
    r.set_header("Cache-Control", "no-store");
    return with_retry_after(std::move(r), options_.retry_after);
}

response idempotency_layer::handle_steps(const request& req, const admission& a,
                                         detail::function_ref<execution<response>()> run,
                                         detail::function_ref<std::optional<operation_state>()> state) {
    const auto decided = [&](outcome o) {
        executor_.telemetry().on_decision({entry_point::http, o, mode::enforce, options_.profile});
    };
    try {
        execution<response> e = run();
        decided(detail::outcome_of(e.status()));
        if (e.status() == execution_status::in_flight) {
            // Another run holds it, or the completer undoes it: where it stands.
            if (std::optional<operation_state> s = state()) return in_progress(*s);
        }
        return answer(std::move(e));
    } catch (const steps_shape_changed&) {
        throw;  // a deployment changed the operation under unfinished keys: never a silent mix
    } catch (const std::exception& failure) {
        // A step, a call or the database failed: once the operation began, what
        // is left of it is the completer's (or the retry's) to finish.
        std::optional<operation_state> s;
        try {
            s = state();
        } catch (const std::exception&) {
            return with_retry_after(problem(codes::store_unavailable), options_.retry_after);
        }
        if (!s && dynamic_cast<const error*>(&failure) == nullptr) throw;
        if (!s) return with_retry_after(problem(codes::store_unavailable), options_.retry_after);
        decided(outcome::executed);  // it ran, and stopped before its end
        operation_info about_it = about(req);
        about_it.name_space = a.key->name_space();
        executor_.telemetry().on_log({log_level::warning, "idem.http.operation_unfinished", a.key->key_hash(),
                                      fmt::format("the request's run stopped ({}); the operation is left to the "
                                                  "completer or a retry",
                                                  failure.what()),
                                      about_it});
        return in_progress(*s);
    }
}

}  // namespace idem::http

namespace idem::http {
namespace {

// What a reconciliation answer says: JSON, never cached (the record changes under it).
response reconciliation_answer(const nlohmann::json& body) {
    response r;
    r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    r.set_header("Content-Type", "application/json");
    r.set_header("Cache-Control", "no-store");
    return r;
}

long long seconds_left(const record_state& s) {
    return std::chrono::ceil<std::chrono::seconds>(s.expires_at - s.now).count();
}

}  // namespace

response idempotency_layer::reconcile(const request& req) const {
    // The key and scope as admit() finds them; there is no run without idempotency to fall back to.
    const parsed_key parsed = parse_key_header(req.key_headers);
    if (parsed.state == key_state::missing) return problem(codes::key_missing);
    if (parsed.state == key_state::invalid) return problem(codes::key_invalid);
    std::optional<scope> owner = options_.resolver ? options_.resolver(req.caller) : scope::global();
    if (!owner) return problem(codes::scope_required);
    const record_key key(options_.name_space, std::move(*owner), parsed.key);

    // By the record key's digest: another scope's record has another digest, so it is absent
    // here, never refused (a refusal would tell that the key exists).
    const resolved_options live = settings();
    auto* inspector = dynamic_cast<record_inspector*>(&idem::detail::executor_access::store_of(executor_, live));
    if (inspector == nullptr) return problem(codes::lookup_unsupported);
    std::optional<record_state> found;
    try {
        found = inspector->inspect(key, true);
    } catch (const store_error&) {
        return with_retry_after(problem(codes::store_unavailable), options_.retry_after);
    }
    if (!found || found->expired()) return reconciliation_answer({{"state", "absent"}});
    if (!found->completed) {
        return with_retry_after(reconciliation_answer({{"state", "in_flight"}, {"expires_in", seconds_left(*found)}}),
                                options_.retry_after);
    }
    nlohmann::json answer{{"state", "completed"}, {"expires_in", seconds_left(*found)}};
    response stored;
    try {
        std::string payload = found->payload.value_or(std::string());
        // Sealed at rest as the executor seals it: bound to the record's key hash.
        if (encryption_keys::is_sealed(payload)) {
            if (!live.encryption) throw payload_unreadable(payload_unreadable::reason::unknown_key, "no keys");
            payload = live.encryption->open(payload, {reinterpret_cast<const char*>(key.digest().data()), 16});
        }
        stored = codec_->deserialize(payload);
    } catch (const std::exception&) {
        // Not a stored response (another writer in the namespace), or sealed under a key the
        // ring lacks: completed, with no status to tell.
        return reconciliation_answer(answer);
    }
    answer["status"] = stored.status;
    if (options_.reconcile_body) {
        nlohmann::json headers = nlohmann::json::array();
        for (const auto& [name, value] : stored.headers) headers.push_back({name, value});
        answer["headers"] = std::move(headers);
        if (idem::detail::is_valid_utf8(stored.body))
            answer["body"] = stored.body;
        else
            answer["body_base64url"] = idem::detail::base64url(std::as_bytes(std::span(stored.body)));
    }
    return reconciliation_answer(answer);
}

}  // namespace idem::http
