#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "../support/recording_sink.hpp"
#include "idem/inbox.hpp"
#include "idem/memory_store.hpp"

using namespace idem;
using namespace std::chrono_literals;

TEST_CASE("telemetry: the metrics sink counts decisions and renders Prometheus text") {
    auto metrics = std::make_shared<metrics_sink>();
    executor_options o;
    o.profiles["pay\"ments"] = {};
    executor exec(std::make_shared<memory_store>(), o, metrics);
    const record_key key("ns", "k");
    for (int i = 0; i < 3; ++i)
        (void)exec.execute(
            key, "fp", {.profile = "pay\"ments"}, [] { return std::string("x"); }, string_codec{});
    CHECK(metrics->count(entry_point::executor, outcome::executed, mode::enforce, "pay\"ments") == 1);
    CHECK(metrics->count(entry_point::executor, outcome::replay, mode::enforce, "pay\"ments") == 2);
    const std::string text = metrics->render_prometheus();
    CHECK(text.find("# TYPE idem_decisions_total counter") != std::string::npos);
    CHECK(
        text.find(
            R"(idem_decisions_total{entry_point="executor",outcome="replay",mode="enforce",profile="pay\"ments"} 2)") !=
        std::string::npos);
}

TEST_CASE("telemetry: the log sink writes one logfmt line per event at or above its level") {
    std::ostringstream out;
    log_sink sink(out, log_level::warning);
    sink.on_log({log_level::info, "idem.quiet", "0123456789abcdef", "not shown"});
    sink.on_log({log_level::warning, "idem.complete.stale", "0123456789abcdef", "said \"this\""});
    const std::string text = out.str();
    CHECK(text.find("not shown") == std::string::npos);
    CHECK(text.find("level=warning event=idem.complete.stale key_hash=0123456789abcdef msg=\"said \\\"this\\\"\"") !=
          std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') == 1);
    CHECK(text.find("msg=\"said \\\"this\\\"\" entry_point=executor\n") != std::string::npos);
}

TEST_CASE("telemetry: the log sink names the operation an event is about") {
    std::ostringstream out;
    log_sink sink(out);
    sink.on_log({log_level::warning,
                 "idem.http.unscoped",
                 "",
                 "no caller",
                 {entry_point::http, "payments.http", "api", "POST", "/accounts/{id}"}});
    CHECK(out.str().find(R"(msg="no caller" entry_point=http namespace="payments.http" profile="api" method="POST")"
                         R"( route="/accounts/{id}")") != std::string::npos);
}

TEST_CASE("telemetry: the default sink is silent and shared") {
    CHECK(null_sink() == null_sink());
    null_sink()->on_decision({entry_point::executor, outcome::executed, mode::enforce, ""});
}

TEST_CASE("telemetry: no key or scope text ever reaches a sink") {
    const std::string secret_key = "SECRET-KEY-4242";
    const std::string secret_scope = "SECRET-TENANT-77";
    auto clock = std::make_shared<manual_clock>();
    auto store = std::make_shared<memory_store>(clock);
    auto sink = std::make_shared<test::recording_sink>();
    executor exec(store, {.mode = mode::enforce, .lease = 10s}, sink);
    inbox box(exec);
    const record_key key("ns", scope::tenant(secret_scope), secret_key);
    string_codec codec;
    // Every path that reports: executed, replay, key_reused, in_flight, failure, stale, release, observe.
    (void)exec.execute(
        key, "fp", {}, [] { return std::string("r"); }, codec);
    (void)exec.execute(
        key, "fp", {}, [] { return std::string("r"); }, codec);
    (void)exec.execute(
        key, "other", {}, [] { return std::string("r"); }, codec);
    const record_key k2("ns", scope::tenant(secret_scope), secret_key + "-2");
    CHECK_THROWS((void)exec.execute(
        k2, "fp", {}, []() -> std::string { throw std::runtime_error("x"); }, codec));
    (void)exec.execute(
        k2, "fp", {}, [] { return std::string("r"); }, codec);
    clock->advance(11s);
    const record_key k3("ns", scope::tenant(secret_scope), secret_key + "-3");
    (void)exec.execute(
        k3, "fp", {},
        [&] {
            clock->advance(11s);
            (void)exec.execute(
                k3, "fp", {}, [] { return std::string("r"); }, codec);
            return std::string("late");
        },
        codec);
    (void)exec.execute(
        key, "fp", {.mode = mode::observe}, [] { return std::string("r"); }, codec);
    (void)box.process(secret_key, secret_key, scope::tenant(secret_scope), [] {});
    REQUIRE(sink->logs().size() >= 2);
    REQUIRE(sink->decisions().size() >= 7);
    const std::string seen = sink->all_text();
    CHECK(seen.find("SECRET") == std::string::npos);
    CHECK(seen.find(k2.key_hash()) != std::string::npos);  // records are named by their hash
}
