// The executor on the Redis store, and the Redis example of docs/redis.md, on the shared test server.
#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "helpers.hpp"
#include "idem/encryption.hpp"
#include "idem/executor.hpp"
#include "idem/keys.hpp"
#include "idem/redis_store.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;

namespace {

std::atomic<int> emails_sent{0};

std::string send_email(const std::string& order_id) {
    return "msg-" + order_id + "-" + std::to_string(++emails_sent);
}

// readme:begin redis-store
idem::executor make_executor(const std::string& redis_host, int redis_port) {
    idem::redis_options redis;
    redis.host = redis_host;
    redis.port = redis_port;
    redis.pool_size = 16;  // threads beyond 16 wait for a free connection
    auto store = std::make_shared<idem::redis_store>(redis);
    store->ping();  // bad settings fail at startup, not on the first request
    // lease >= max(this service's request timeout: 30 s, the client's total retry budget: 60 s)
    return idem::executor(store, {.lease = std::chrono::seconds(60)});
}

std::string notify_shipped(idem::executor& exec, const std::string& order_id) {
    const idem::record_key key("shipping.notify", idem::scope::global(), idem::keys::derive("shipped", {order_id}));
    auto e = exec.execute(
        key, order_id, {}, [&] { return send_email(order_id); }, idem::string_codec{});
    if (e.status() == idem::execution_status::in_flight) throw std::runtime_error("sending; retry later");
    return e.value();  // the id of the one email sent, on every retry
}
// readme:end redis-store

std::string read(const std::string& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("redis: 32 threads executing one key through the executor run the operation exactly once") {
    idem::executor exec(std::make_shared<idem::redis_store>(idem::test::shared_redis_options()));
    const std::string name_space = idem::test::fresh_namespace();
    constexpr int threads = 32;
    constexpr int rounds = 10;
    for (int round = 0; round < rounds; ++round) {
        const idem::record_key key(name_space, "order-" + std::to_string(round));
        std::atomic<int> runs{0}, executed{0}, replayed{0}, in_flight{0}, wrong_values{0};
        std::barrier start(threads);
        {
            std::vector<std::jthread> pool;
            for (int t = 0; t < threads; ++t) {
                pool.emplace_back([&] {
                    start.arrive_and_wait();
                    auto e = exec.execute(
                        key, "fp", {},
                        [&] {
                            ++runs;
                            std::this_thread::sleep_for(5ms);
                            return std::string("once");
                        },
                        idem::string_codec{});
                    if (e.status() == idem::execution_status::executed) ++executed;
                    if (e.status() == idem::execution_status::replayed) ++replayed;
                    if (e.status() == idem::execution_status::in_flight) ++in_flight;
                    if (e.has_value() && e.value() != "once") ++wrong_values;
                });
            }
        }
        CHECK_MESSAGE(runs == 1, "round " << round);
        CHECK(executed == 1);
        CHECK(replayed + in_flight == threads - 1);
        CHECK(wrong_values == 0);
    }
    auto replay = exec.execute(
        idem::record_key(name_space, "order-0"), "fp", {}, [] { return std::string("again"); }, idem::string_codec{});
    CHECK(replay.status() == idem::execution_status::replayed);
    CHECK(replay.value() == "once");
}

TEST_CASE("redis: the Redis example of docs/redis.md is this code, and it sends one email per order") {
    const std::string source = read(IDEM_SOURCE_ROOT "/tests/redis/redis_executor_test.cpp");
    const auto begin = source.find('\n', source.find("// readme:begin redis-store")) + 1;
    const auto end = source.find("// readme:end redis-store");
    REQUIRE(end != std::string::npos);
    CHECK_MESSAGE(read(IDEM_SOURCE_ROOT "/docs/redis.md").find(source.substr(begin, end - begin)) != std::string::npos,
                  "docs/redis.md does not show this file's redis-store example");

    const auto at = idem::test::shared_redis();
    auto exec = make_executor(at.host, at.port);
    const std::string order = "order-" + idem::detail::new_token().substr(0, 8);
    const int before = emails_sent;
    const std::string first = notify_shipped(exec, order);
    CHECK(notify_shipped(exec, order) == first);
    CHECK(emails_sent == before + 1);
}

TEST_CASE("redis: with encryption keys a result's marker is nowhere in its entry, and the replay is byte-identical") {
    const std::string marker = "card=4111111111111111;token=sk_live_MARKER";
    const std::string name_space = idem::test::fresh_namespace();
    idem::test::redis_client raw(idem::test::shared_redis());
    for (const bool encrypted : {false, true}) {
        CAPTURE(encrypted);
        idem::executor_options options;
        if (encrypted)
            options.encryption = std::make_shared<const idem::encryption_keys>(
                std::vector<idem::encryption_key>{{.id = "k1", .bytes = std::string(32, '\x11')}});
        idem::executor exec(std::make_shared<idem::redis_store>(idem::test::shared_redis_options()), options);
        const idem::record_key key(name_space, encrypted ? "sealed" : "plain");
        int runs = 0;
        auto charge = [&] {
            return exec.execute(
                key, "fp", {}, [&] { return "charged " + std::to_string(++runs) + " " + marker; },
                idem::string_codec{});
        };
        const auto first = charge();
        CHECK(first.status() == idem::execution_status::executed);
        const auto again = charge();
        CHECK(again.status() == idem::execution_status::replayed);
        CHECK(again.value() == first.value());
        CHECK(runs == 1);
        const std::string stored = raw.text({"HGET", key.to_storage_key(), "p"});
        CHECK(!stored.empty());
        CHECK((stored.find(marker) == std::string::npos) == encrypted);
        CHECK(idem::encryption_keys::is_sealed(stored) == encrypted);
        CHECK(raw.text({"DEL", key.to_storage_key()}) == "1");  // a shared server keeps no leftovers
    }
}
