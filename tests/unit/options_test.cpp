#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "idem/executor.hpp"
#include "idem/memory_store.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> problems_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const options_error& e) {
        return e.problems();
    }
    return {};
}

bool mentions(const std::vector<std::string>& problems, std::string_view text) {
    for (const auto& p : problems)
        if (p.find(text) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("options: defaults are 1m lease, 15m max lease, 24h retention, 10m failure retention, enforce") {
    const executor_options o;
    CHECK(o.lease == 1min);
    CHECK(o.max_lease == 15min);
    CHECK(o.retention == 24h);
    CHECK(o.failure_retention == 10min);
    CHECK(o.mode == mode::enforce);
    CHECK(o.problems().empty());
}

TEST_CASE("options: construction rejects invalid options naming every invalid field") {
    executor_options o;
    o.lease = 20min;  // above max_lease
    o.failure_retention = -1s;
    o.profiles["fast"] = {.lease = 2h, .retention = 1h};
    o.profiles["broken"] = {.retention = 0s, .store = "nowhere"};
    const auto problems = problems_of([&] { executor exec(std::make_shared<memory_store>(), o); });
    CHECK(mentions(problems, "lease (20m) exceeds max_lease (15m)"));
    CHECK(mentions(problems, "failure_retention must be positive"));
    CHECK(mentions(problems, "profiles.fast.lease (2h) exceeds max_lease"));
    CHECK(mentions(problems, "profiles.fast.lease (2h) exceeds retention (1h)"));
    CHECK(mentions(problems, "profiles.broken.retention must be positive"));
    CHECK(mentions(problems, "profiles.broken.store: no store named 'nowhere'"));
    CHECK(problems.size() == 6);
}

TEST_CASE("options: a profile's remembered window must be positive, at most 100 years and longer than its retention") {
    executor_options o;
    o.retention = 2h;
    o.profiles["zero"] = {.remember = 0s};
    o.profiles["negative"] = {.remember = -1s};
    o.profiles["short"] = {.remember = 1h};                         // the global retention, 2h, is longer
    o.profiles["equal"] = {.retention = 30min, .remember = 30min};  // as long: nothing would be remembered
    o.profiles["huge"] = {.remember = max_duration + 1s};
    o.profiles["fine"] = {.retention = 1h, .remember = 24h * 90};
    const auto problems = problems_of([&] { executor exec(std::make_shared<memory_store>(), o); });
    CHECK(mentions(problems, "profiles.zero.remember must be positive"));
    CHECK(mentions(problems, "profiles.negative.remember must be positive"));
    CHECK(mentions(problems, "profiles.short.remember (1h) must be longer than retention (2h)"));
    CHECK(mentions(problems, "profiles.equal.remember (30m) must be longer than retention (30m)"));
    CHECK(mentions(problems, "profiles.huge.remember must be at most 100 years"));
    CHECK(problems.size() == 5);

    // A replacement that shortens the window below the retention makes every call throw until fixed.
    auto source = std::make_shared<options_source>(executor_options{.profiles = {{"pay", {.remember = 48h}}}});
    executor exec({{"", std::make_shared<memory_store>()}}, source);
    const record_key key("pay", "k");
    CHECK(source->resolve({.profile = "pay"}).remember == 48h);
    CHECK(source->resolve({}).remember == duration::zero());  // a window is a profile's
    CHECK(exec.execute(key, "fp", {.profile = "pay"}, [] { return std::string("ok"); }).status() ==
          execution_status::executed);
    source->replace({.profiles = {{"pay", {.remember = 1h}}}});
    CHECK_THROWS_AS((void)exec.execute(key, "fp", {.profile = "pay"}, [] { return std::string("ok"); }), options_error);
}

TEST_CASE("options: leases and retentions above 100 years are invalid, everywhere they are set") {
    executor_options o;
    o.max_lease = duration::max();
    o.lease = duration::max();
    o.retention = max_duration + 1ns;
    o.failure_retention = duration::max();
    o.profiles["forever"] = {.lease = duration::max(), .retention = std::chrono::years(101)};
    const auto problems = problems_of([&] { executor exec(std::make_shared<memory_store>(), o); });
    CHECK(mentions(problems, "lease must be at most 100 years"));
    CHECK(mentions(problems, "retention must be at most 100 years"));
    CHECK(mentions(problems, "failure_retention must be at most 100 years"));
    CHECK(mentions(problems, "profiles.forever.lease must be at most 100 years"));
    CHECK(mentions(problems, "profiles.forever.retention must be at most 100 years"));

    executor_options longest;
    longest.max_lease = max_duration;
    longest.lease = max_duration;
    longest.retention = max_duration;
    CHECK(longest.problems().empty());
    executor exec(std::make_shared<memory_store>(), longest);
    const record_key key("ns", "k");
    CHECK(mentions(problems_of([&] {
                       (void)exec.execute(
                           key, "fp", {.lease = duration::max()}, [] { return std::string(); }, string_codec{});
                   }),
                   "execution_options.lease must be at most 100 years"));
    CHECK(exec.execute(
                  key, "fp", {}, [] { return std::string("ran"); }, string_codec{})
              .value() == "ran");
}

TEST_CASE("options: a per-call setting is checked on each call") {
    executor exec(std::make_shared<memory_store>());
    const record_key key("ns", "k");
    auto problems = problems_of([&] {
        (void)exec.execute(
            key, "fp", {.lease = 16min}, [] { return std::string(); }, string_codec{});
    });
    CHECK(mentions(problems, "execution_options.lease (16m) exceeds max_lease (15m)"));
    problems = problems_of([&] { (void)exec.resolve_mode({.profile = "missing"}); });
    CHECK(mentions(problems, "no profile named 'missing'"));
    CHECK(exec.resolve_mode({.profile = "messaging"}) == mode::enforce);  // built in
}

TEST_CASE("options: parse_mode accepts the three names in any casing and nothing else") {
    CHECK(parse_mode("Observe") == mode::observe);
    CHECK(parse_mode("ENFORCE") == mode::enforce);
    CHECK(parse_mode("off") == mode::off);
    CHECK_THROWS_AS((void)parse_mode("enforced"), std::invalid_argument);
    CHECK_THROWS_AS((void)parse_mode(""), std::invalid_argument);
}

TEST_CASE("options: an invalid replacement makes every call throw until it is fixed") {
    auto source = std::make_shared<options_source>();
    executor exec({{"", std::make_shared<memory_store>()}}, source);
    const record_key key("ns", "k");
    source->replace({.lease = 2h});
    CHECK_THROWS_AS((void)exec.execute(
                        key, "fp", {}, [] { return std::string(); }, string_codec{}),
                    options_error);
    CHECK_THROWS_AS((void)exec.resolve_mode(), options_error);
    source->replace({.mode = mode::observe});
    CHECK(exec.resolve_mode() == mode::observe);
    CHECK(exec.execute(
                  key, "fp", {}, [] { return std::string("ok"); }, string_codec{})
              .value() == "ok");
}

TEST_CASE("options: replacing options while 8 threads call changes the mode without a lost or torn call") {
    auto source = std::make_shared<options_source>(executor_options{.mode = mode::observe});
    auto store = std::make_shared<memory_store>();
    executor exec({{"", store}}, source);
    std::atomic<bool> stop{false};
    std::atomic<int> calls{0}, errors{0};
    std::atomic<int> modes_seen[3] = {0, 0, 0};
    {
        std::vector<std::jthread> threads;
        for (int t = 0; t < 8; ++t) {
            threads.emplace_back([&, t] {
                for (int i = 0; !stop; ++i) {
                    try {
                        auto e = exec.execute(
                            record_key("ns", std::to_string(t) + "-" + std::to_string(i)), "fp", {},
                            [] { return std::string("x"); }, string_codec{});
                        ++modes_seen[static_cast<int>(e.mode())];
                        ++calls;
                    } catch (const options_error&) {
                        ++errors;  // only while the invalid options are in place
                    }
                }
            });
        }
        // Each replacement stays until a call has seen it (a call counted after the
        // replacement could have read the old options, so wait for the new one's mark).
        const auto seen = [](const std::function<bool()>& done) {
            const auto deadline = std::chrono::steady_clock::now() + 10s;
            while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
            return done();
        };
        for (int round = 0; round < 50; ++round) {
            const mode next = round % 2 == 0 ? mode::enforce : mode::observe;
            const int before = modes_seen[static_cast<int>(next)];
            source->replace({.mode = next});
            CHECK(seen([&] { return modes_seen[static_cast<int>(next)] > before; }));
        }
        source->replace({.lease = 2h});  // invalid
        CHECK(seen([&] { return errors > 0; }));
        source->replace({.mode = mode::off});
        CHECK(seen([&] { return modes_seen[static_cast<int>(mode::off)] > 0; }));
        stop = true;
    }
    CHECK(calls > 0);
    CHECK(modes_seen[static_cast<int>(mode::enforce)] > 0);
    CHECK(modes_seen[static_cast<int>(mode::observe)] > 0);
    CHECK(modes_seen[static_cast<int>(mode::off)] > 0);
}

TEST_CASE("options: format_duration picks the largest exact unit") {
    CHECK(format_duration(15min) == "15m");
    CHECK(format_duration(90s) == "90s");
    CHECK(format_duration(250ms) == "250ms");
    CHECK(format_duration(std::chrono::hours(48)) == "2d");
    CHECK(format_duration(1500us) == "1500us");
}
