#include "idem/http/layer.hpp"

#include "idem/http/fingerprint.hpp"
#include "idem/http/key_header.hpp"
#include "idem/http/problem.hpp"
#include "idem/http/response_codec.hpp"

namespace idem::http {
namespace {

executor_options executor_options_for(const layer_options& o) {
    executor_options e;
    e.mode = o.mode;
    e.lease = o.lease;
    e.retention = o.retention;
    e.failure_retention = o.server_error_retention;
    std::vector<std::string> problems = e.problems();
    for (auto& p : problems) {
        if (p.starts_with("failure_retention")) p.replace(0, 17, "server_error_retention");
    }
    if (o.methods.empty()) problems.emplace_back("methods is empty");
    if (o.header_name.empty()) problems.emplace_back("header_name is empty");
    if (o.max_stored_body == 0) problems.emplace_back("max_stored_body must be positive");
    if (o.retry_after.count() < 0) problems.emplace_back("retry_after must not be negative");
    try {
        (void)record_key(o.name_space, "probe");
    } catch (const std::invalid_argument&) {
        problems.emplace_back("name_space must be non-empty UTF-8 of at most 256 bytes");
    }
    if (!problems.empty()) throw options_error(std::move(problems));
    return e;
}

response with_retry_after(response r, std::chrono::seconds after) {
    r.set_header("Retry-After", std::to_string(after.count()));
    return r;
}

}  // namespace

idempotency_layer::idempotency_layer(std::shared_ptr<record_store> store, layer_options options,
                                     std::shared_ptr<telemetry_sink> telemetry)
    : options_(std::move(options)),
      telemetry_(telemetry ? std::move(telemetry) : null_sink()),
      executor_(std::move(store), executor_options_for(options_), telemetry_),
      codec_(std::make_unique<response_codec>(options_)) {}

admission idempotency_layer::admit(const request& req) const {
    if (options_.mode == mode::off || !options_.methods.contains(req.method)) return {};
    const parsed_key parsed = parse_key_header(req.key_headers);
    if (parsed.state == key_state::missing) {
        if (options_.require_key) return {.answer = problem(codes::key_missing)};
        return {};
    }
    if (parsed.state == key_state::invalid) return {.answer = problem(codes::key_invalid)};

    std::optional<scope> owner = options_.resolver ? options_.resolver(req.caller) : scope::global();
    if (!owner) {
        telemetry_->on_decision({entry_point::http, outcome::unscoped, options_.mode, {}});
        if (options_.unscoped == unscoped_behavior::reject) return {.answer = problem(codes::scope_required)};
        return {};
    }
    return {.key = record_key(options_.name_space, std::move(*owner), parsed.key),
            .fingerprint = request_fingerprint(req.method, req.target, req.body)};
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
    }
    return problem(codes::key_reused);
}

response idempotency_layer::handle_erased(const request& req, detail::function_ref<response()> endpoint) {
    admission a = admit(req);
    if (a.answer) return std::move(*a.answer);
    if (!a.key) return endpoint();
    bool started = false;
    auto run = [&] {
        started = true;
        return endpoint();
    };
    try {
        return answer(executor_.execute(*a.key, a.fingerprint, {.entry = entry_point::http}, run, *codec_));
    } catch (const store_error&) {
        if (started) throw;  // the endpoint's own failure, not the record store's
        return with_retry_after(problem(codes::store_unavailable), options_.retry_after);
    }
}

}  // namespace idem::http
