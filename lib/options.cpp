#include "idem/options.hpp"

#include <algorithm>

#include "idem/error.hpp"
#include "internal/options_file.hpp"

namespace idem {

struct options_source::snapshot {
    std::shared_ptr<const executor_options> options;
    std::optional<std::set<std::string, std::less<>>> stores;
    std::vector<std::string> problems;
};

namespace {

// Checks one effective setting set; `where` prefixes field names ("" or "profiles.x.").
void check(std::vector<std::string>& problems, const std::string& where, const std::optional<duration>& lease,
           const std::optional<duration>& retention, const std::optional<duration>& failure_retention,
           const std::optional<std::string>& store, duration effective_lease, duration effective_retention,
           duration max_lease, const std::set<std::string, std::less<>>* stores) {
    const auto positive = [&](const std::optional<duration>& d, const char* field) {
        if (d && *d <= duration::zero()) problems.push_back(where + field + " must be positive");
        if (d && *d > max_duration) problems.push_back(where + field + " must be at most 100 years");
    };
    positive(lease, "lease");
    positive(retention, "retention");
    positive(failure_retention, "failure_retention");
    if (lease && *lease > duration::zero()) {
        if (effective_lease > max_lease)
            problems.push_back(where + "lease (" + format_duration(effective_lease) + ") exceeds max_lease (" +
                               format_duration(max_lease) + ")");
    }
    if ((lease || retention) && effective_lease > effective_retention && effective_retention > duration::zero() &&
        effective_lease > duration::zero())
        problems.push_back(where + "lease (" + format_duration(effective_lease) + ") exceeds retention (" +
                           format_duration(effective_retention) + ")");
    if (store && stores != nullptr && !stores->contains(*store))
        problems.push_back(where + "store: no store named '" + *store + "'");
}

// RFC 9110 section 5.6.2: a field name is a token.
bool is_token(std::string_view name) {
    constexpr std::string_view specials = "!#$%&'*+-.^_`|~";
    const auto allowed = [&](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               specials.find(c) != std::string_view::npos;
    };
    return !name.empty() && std::all_of(name.begin(), name.end(), allowed);
}

}  // namespace

std::vector<std::string> http_overrides::problems(const std::string& where) const {
    std::vector<std::string> out;
    if (header_name && !is_token(*header_name)) out.push_back(where + "header_name must be a non-empty HTTP token");
    return out;
}

std::vector<std::string> executor_options::problems(const std::set<std::string, std::less<>>* stores) const {
    std::vector<std::string> out;
    if (max_lease <= duration::zero()) out.emplace_back("max_lease must be positive");
    check(out, "", lease, retention, failure_retention, store, lease, retention, max_lease, stores);
    if (!is_token(http.header_name)) out.emplace_back("http.header_name must be a non-empty HTTP token");
    for (const auto& [name, p] : profiles) {
        if (name.empty()) {
            out.emplace_back("profiles: a profile name is empty");
            continue;
        }
        check(out, "profiles." + name + ".", p.lease, p.retention, p.failure_retention, p.store,
              p.lease.value_or(lease), p.retention.value_or(retention), max_lease, stores);
        if (p.remember) {
            const std::string field = "profiles." + name + ".remember";
            const duration kept = p.retention.value_or(retention);
            if (*p.remember <= duration::zero())
                out.push_back(field + " must be positive");
            else if (*p.remember > max_duration)
                out.push_back(field + " must be at most 100 years");
            else if (*p.remember <= kept)
                out.push_back(field + " (" + format_duration(*p.remember) + ") must be longer than retention (" +
                              format_duration(kept) + ")");
        }
        for (auto& problem : p.http.problems("profiles." + name + ".http.")) out.push_back(std::move(problem));
    }
    return out;
}

options_source::options_source(executor_options initial,
                               std::optional<std::set<std::string, std::less<>>> known_stores) {
    publish(std::make_shared<const executor_options>(std::move(initial)), std::move(known_stores));
    (void)current();  // reject invalid initial options at construction
}

void options_source::publish(std::shared_ptr<const executor_options> options,
                             std::optional<std::set<std::string, std::less<>>> stores) {
    auto next = std::make_shared<snapshot>();
    next->problems = options->problems(stores ? &*stores : nullptr);
    next->options = std::move(options);
    next->stores = std::move(stores);
    snapshot_.store(std::move(next));
}

void options_source::replace(executor_options next) {
    publish(std::make_shared<const executor_options>(std::move(next)), load()->stores);
}

void options_source::set_known_stores(std::set<std::string, std::less<>> stores) {
    publish(load()->options, std::move(stores));
    (void)current();
}

std::shared_ptr<options_source> options_source::from_json(
    std::filesystem::path path, std::optional<std::set<std::string, std::less<>>> known_stores) {
    executor_options options = detail::read_options_file(path, known_stores ? &*known_stores : nullptr);
    auto source = std::make_shared<options_source>(std::move(options), std::move(known_stores));
    source->file_ = std::move(path);
    return source;
}

void options_source::reload() {
    if (file_.empty()) throw std::logic_error("idem: reload() needs an options_source made by from_json");
    const auto stores = load()->stores;
    // Checked before it is published: a bad file never replaces the options in force.
    auto next = detail::read_options_file(file_, stores ? &*stores : nullptr);
    publish(std::make_shared<const executor_options>(std::move(next)), stores);
}

std::shared_ptr<const options_source::snapshot> options_source::load() const {
    return snapshot_.load();
}

std::shared_ptr<const executor_options> options_source::current() const {
    auto s = load();
    if (!s->problems.empty()) throw options_error(s->problems);
    return s->options;
}

resolved_options options_source::resolve(const execution_options& call) const {
    const auto state = load();
    if (!state->problems.empty()) throw options_error(state->problems);
    const executor_options* global = state->options.get();
    const profile_options* profile = nullptr;
    static const profile_options builtin_messaging{.retention = messaging_retention};
    if (!call.profile.empty()) {
        if (auto it = global->profiles.find(call.profile); it != global->profiles.end())
            profile = &it->second;
        else if (call.profile == messaging_profile)
            profile = &builtin_messaging;
        else
            throw options_error({"profile: no profile named '" + call.profile + "'"});
    }
    const auto pick = [&](const auto& from_call, auto from_profile, const auto& from_global) {
        if (from_call) return *from_call;
        if (profile != nullptr && (profile->*from_profile)) return *(profile->*from_profile);
        return from_global;
    };
    resolved_options r{
        .mode = pick(call.mode, &profile_options::mode, global->mode),
        .lease = pick(call.lease, &profile_options::lease, global->lease),
        .retention = pick(call.retention, &profile_options::retention, global->retention),
        .failure_retention =
            pick(call.failure_retention, &profile_options::failure_retention, global->failure_retention),
        .store = pick(call.store, &profile_options::store, global->store),
        .profile = call.profile,
        .http = profile != nullptr ? profile->http.applied_to(global->http) : global->http,
        .encryption = global->encryption,
        .remember = profile != nullptr ? profile->remember.value_or(duration::zero()) : duration::zero(),
    };
    std::vector<std::string> problems;
    check(problems, "execution_options.", call.lease, call.retention, call.failure_retention, call.store, r.lease,
          r.retention, global->max_lease, state->stores ? &*state->stores : nullptr);
    if (!problems.empty()) throw options_error(std::move(problems));
    return r;
}

std::string format_duration(duration d) {
    using namespace std::chrono;
    const auto count = d.count();
    const std::pair<duration, const char*> units[] = {{hours(24), "d"},        {hours(1), "h"},
                                                      {minutes(1), "m"},       {seconds(1), "s"},
                                                      {milliseconds(1), "ms"}, {microseconds(1), "us"}};
    for (const auto& [unit, suffix] : units) {
        if (count != 0 && count % unit.count() == 0) return std::to_string(count / unit.count()) + suffix;
    }
    return std::to_string(count) + "ns";
}

}  // namespace idem
