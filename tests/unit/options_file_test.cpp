// Executor options read from a JSON file, and reloaded while calls run.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "idem/executor.hpp"
#include "idem/memory_store.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

// A file of its own under the temp directory, replaced atomically (as an editor or a
// deployment does), removed at the end.
class options_file {
public:
    options_file() {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("idem-options-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json");
    }
    ~options_file() {
        std::error_code ignored;
        std::filesystem::remove(path_, ignored);
    }
    options_file(const options_file&) = delete;
    options_file& operator=(const options_file&) = delete;

    void write(std::string_view text) const {
        const auto next = path_.string() + ".next";
        std::ofstream(next, std::ios::binary | std::ios::trunc) << text;
        std::filesystem::rename(next, path_);
    }
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

std::vector<std::string> problems_of(std::string_view json) {
    try {
        (void)executor_options_from_json(json);
    } catch (const options_error& e) {
        return e.problems();
    }
    return {};
}

// Waits (10 s at most) until `n` more calls have finished, so every mode gets calls
// even on a loaded machine.
void wait_for_calls(const std::atomic<int>& calls, int n) {
    const int target = calls + n;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (calls < target && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

const std::string complete_file = R"({
  "mode": "observe",
  "lease": "2m",
  "max_lease": "20m",
  "retention": "2d",
  "failure_retention": "15m",
  "store": "ledger",
  "profiles": {
    "payments": {"mode": "enforce", "lease": "90s", "retention": "7d", "failure_retention": "1h", "store": "",
                 "remember": "90d"},
    "reports": {"mode": "off"}
  },
  "http": {"header_name": "X-Request-Key", "require_key": true, "unscoped": "bypass"}
})";

}  // namespace

TEST_CASE("options file: every field of the options and of a profile is read") {
    const executor_options o = executor_options_from_json(complete_file);
    CHECK(o.mode == mode::observe);
    CHECK(o.lease == 2min);
    CHECK(o.max_lease == 20min);
    CHECK(o.retention == 48h);
    CHECK(o.failure_retention == 15min);
    CHECK(o.store == "ledger");
    REQUIRE(o.profiles.size() == 2);
    const profile_options& p = o.profiles.at("payments");
    CHECK(p.mode == mode::enforce);
    CHECK(p.lease == 90s);
    CHECK(p.retention == std::chrono::hours(24 * 7));
    CHECK(p.failure_retention == 1h);
    CHECK(p.store == "");
    CHECK(p.remember == std::chrono::hours(24 * 90));
    const profile_options& r = o.profiles.at("reports");
    CHECK_FALSE(r.remember.has_value());
    CHECK(r.mode == mode::off);
    CHECK_FALSE(r.lease.has_value());
    CHECK_FALSE(r.retention.has_value());
    CHECK_FALSE(r.failure_retention.has_value());
    CHECK_FALSE(r.store.has_value());
    CHECK(o.http.header_name == "X-Request-Key");
    CHECK(o.http.require_key);
    CHECK(o.http.unscoped == idem::unscoped_behavior::bypass);
}

TEST_CASE("options file: a profile's http fields override the global ones for that profile alone") {
    const auto source = std::make_shared<options_source>(executor_options_from_json(R"({
      "http": {"header_name": "X-Request-Key", "require_key": true},
      "profiles": {"webhooks": {"http": {"require_key": false, "unscoped": "bypass"}},
                   "strict": {"mode": "enforce"}}
    })"));
    const executor_options o = *source->current();
    CHECK(o.profiles.at("webhooks").http.require_key == false);
    CHECK(o.profiles.at("webhooks").http.unscoped == idem::unscoped_behavior::bypass);
    CHECK_FALSE(o.profiles.at("webhooks").http.header_name.has_value());
    CHECK_FALSE(o.profiles.at("strict").http.require_key.has_value());
    const http_settings webhooks = source->resolve({.profile = "webhooks"}).http;
    CHECK(webhooks.header_name == "X-Request-Key");  // left to the global one
    CHECK_FALSE(webhooks.require_key);
    CHECK(webhooks.unscoped == idem::unscoped_behavior::bypass);
    for (const std::string profile : {"", "strict"}) {
        const http_settings global = source->resolve({.profile = profile}).http;
        CHECK(global.header_name == "X-Request-Key");
        CHECK(global.require_key);
        CHECK(global.unscoped == idem::unscoped_behavior::reject);
    }
}

TEST_CASE("options file: an empty object gives the defaults; every unit is understood") {
    const executor_options defaults;
    const executor_options o = executor_options_from_json("{}");
    CHECK(o.mode == defaults.mode);
    CHECK(o.lease == defaults.lease);
    CHECK(o.retention == defaults.retention);
    CHECK(o.profiles.empty());
    const auto with_lease = [](std::string_view d) {
        return executor_options_from_json(R"({"max_lease": "1000d", "retention": "1000d", "lease": ")" +
                                          std::string(d) + "\"}")
            .lease;
    };
    CHECK(with_lease("5ns") == 5ns);
    CHECK(with_lease("5us") == 5us);
    CHECK(with_lease("5ms") == 5ms);
    CHECK(with_lease("5s") == 5s);
    CHECK(with_lease("5m") == 5min);
    CHECK(with_lease("5h") == 5h);
    CHECK(with_lease("5d") == std::chrono::hours(120));
}

TEST_CASE("options file: each invalid field is named, one at a time") {
    struct bad_field {
        std::string json;
        std::string named;
    };
    const std::vector<bad_field> cases{
        {R"({"mode": "enforced"})", "mode: unknown mode \"enforced\""},
        {R"({"mode": 1})", "mode must be a string"},
        {R"({"lease": "1 minute"})", "lease: \"1 minute\" is not a whole number and a unit"},
        {R"({"lease": 60})", "lease must be a string"},
        {R"({"lease": "-1m"})", "lease: \"-1m\" is not"},
        {R"({"lease": "0s"})", "lease must be positive"},
        {R"({"lease": "16m"})", "lease (16m) exceeds max_lease (15m)"},
        {R"({"max_lease": "1y"})", "max_lease: \"1y\" is not"},
        {R"({"max_lease": "0ms"})", "max_lease must be positive"},
        {R"({"retention": "30s"})", "lease (1m) exceeds retention (30s)"},
        {R"({"retention": "99999999999999999d"})", "retention: \"99999999999999999d\" is not"},
        {R"({"failure_retention": "10"})", "failure_retention: \"10\" is not"},
        {R"({"store": 7})", "store must be a string"},
        {R"({"profiles": []})", "profiles must be a JSON object"},
        {R"({"profiles": {"p": "enforce"}})", "profiles.p must be a JSON object"},
        {R"({"profiles": {"p": {"mode": "strict"}}})", "profiles.p.mode: unknown mode \"strict\""},
        {R"({"profiles": {"p": {"lease": "soon"}}})", "profiles.p.lease: \"soon\" is not"},
        {R"({"profiles": {"p": {"lease": "1h"}}})", "profiles.p.lease (1h) exceeds max_lease (15m)"},
        {R"({"profiles": {"p": {"retention": "0d"}}})", "profiles.p.retention must be positive"},
        {R"({"profiles": {"p": {"failure_retention": true}}})", "profiles.p.failure_retention must be a string"},
        {R"({"profiles": {"p": {"store": null}}})", "profiles.p.store must be a string"},
        {R"({"profiles": {"": {}}})", "profiles: a profile name is empty"},
        {R"({"http": {"require_key": "yes"}})", "http.require_key must be true or false"},
        {R"({"http": {"unscoped": "allow"}})", "http.unscoped: unknown behaviour \"allow\""},
        {R"({"http": {"header": "K"}})", "http.header: unknown field"},
        {R"({"http": {"header_name": 7}})", "http.header_name must be a string"},
        {R"({"profiles": {"p": {"http": []}}})", "profiles.p.http must be a JSON object"},
        {R"({"profiles": {"p": {"http": {"require_key": 1}}}})", "profiles.p.http.require_key must be true or false"},
        {R"({"profiles": {"p": {"http": {"unscoped": "skip"}}}})", "profiles.p.http.unscoped: unknown behaviour"},
        {R"({"profiles": {"p": {"http": {"header_name": "Bad Key"}}}})",
         "profiles.p.http.header_name must be a non-empty HTTP token"},
        {R"({"profiles": {"p": {"http": {"replayed": []}}}})", "profiles.p.http.replayed: unknown field"},
        {R"([1, 2])", "the document must be a JSON object"},
        {R"({"mode": "observe",})", "not valid JSON (at byte"},
    };
    for (const auto& c : cases) {
        const auto problems = problems_of(c.json);
        INFO(c.json);
        REQUIRE_FALSE(problems.empty());
        CHECK_MESSAGE(problems.front().find(c.named) != std::string::npos, problems.front());
    }
}

TEST_CASE("options file: unknown fields are rejected by name, with every other problem") {
    const auto problems = problems_of(R"({
      "mode": "observe", "leese": "1m", "lease": "forever",
      "profiles": {"payments": {"retension": "7d", "mode": "enforce"}}
    })");
    REQUIRE(problems.size() == 3);  // in the order of the field names
    CHECK(problems[0].find("lease: \"forever\"") == 0);
    CHECK(problems[1] == "leese: unknown field");
    CHECK(problems[2] == "profiles.payments.retension: unknown field");
}

TEST_CASE("options file: from_json reads the file; its store names are checked against the known stores") {
    options_file file;
    file.write(complete_file);
    const auto source = options_source::from_json(file.path(), std::set<std::string, std::less<>>{"", "ledger"});
    CHECK(source->current()->store == "ledger");
    CHECK(source->resolve({.profile = "payments"}).lease == 90s);

    try {
        (void)options_source::from_json(file.path(), std::set<std::string, std::less<>>{""});
        FAIL("a store nobody registered was accepted");
    } catch (const options_error& e) {
        CHECK(e.problems() == std::vector<std::string>{"store: no store named 'ledger'"});
    }
    try {
        (void)options_source::from_json(file.path().string() + ".missing");
        FAIL("a missing file was accepted");
    } catch (const options_error& e) {
        REQUIRE(e.problems().size() == 1);
        CHECK(e.problems().front().find("cannot be read") != std::string::npos);
    }
    CHECK_THROWS_AS(options_source().reload(), std::logic_error);
}

TEST_CASE("options file: reload while 8 threads call the executor; a bad file leaves the options in force") {
    options_file file;
    file.write(R"({"mode": "observe"})");
    const auto source = options_source::from_json(file.path());
    executor exec({{"", std::make_shared<memory_store>()}}, source);
    std::atomic<bool> stop{false};
    std::atomic<int> calls{0}, errors{0};
    std::atomic<int> modes_seen[3] = {0, 0, 0};
    int rejected = 0;
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
                    } catch (const std::exception&) {
                        ++errors;
                    }
                }
            });
        }
        for (int round = 0; round < 50; ++round) {
            file.write(round % 2 == 0 ? R"({"mode": "enforce"})" : R"({"mode": "observe"})");
            source->reload();
            wait_for_calls(calls, 8);  // under this file's mode, or the one before: a call reads one snapshot
            file.write(R"({"mode": "enforce", "lease": "2h"})");  // invalid: the last good options stay
            try {
                source->reload();
            } catch (const options_error& e) {
                ++rejected;
                CHECK(e.problems().front() == "lease (2h) exceeds max_lease (15m)");
            }
            CHECK(exec.resolve_mode() == (round % 2 == 0 ? mode::enforce : mode::observe));
        }
        file.write(R"({"mode": "off"})");
        source->reload();
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (modes_seen[static_cast<int>(mode::off)] == 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::yield();
        stop = true;
    }
    CHECK(rejected == 50);
    CHECK(errors == 0);  // no call ever saw the invalid file
    CHECK(calls > 0);
    CHECK(modes_seen[static_cast<int>(mode::enforce)] > 0);
    CHECK(modes_seen[static_cast<int>(mode::observe)] > 0);
    CHECK(modes_seen[static_cast<int>(mode::off)] > 0);
    MESSAGE(calls.load() << " calls; enforce " << modes_seen[static_cast<int>(mode::enforce)].load() << ", observe "
                         << modes_seen[static_cast<int>(mode::observe)].load() << ", off "
                         << modes_seen[static_cast<int>(mode::off)].load());
}
