// Redis-store specifics beyond the shared contract (tests/contract), on the shared
// test server (a throwaway redis-server, or IDEM_TEST_REDIS).
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <atomic>
#include <sstream>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "free_port.hpp"
#include "hash_slot.hpp"
#include "helpers.hpp"
#include "idem/executor.hpp"
#include "idem/redis_store.hpp"
#include "redis_server.hpp"
#include "scripts.hpp"

using namespace idem;
using namespace std::chrono_literals;
using status = reservation_status;
using test::caught_store_error;
using test::fresh_namespace;

namespace {

std::string every_byte_value(std::size_t size) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7 + i / 256) % 256);
    return bytes;
}

}  // namespace

TEST_CASE("redis: a binary-unsafe key and a 1 MiB payload of every byte value round-trip exactly") {
    redis_store store(test::shared_redis_options());
    const std::string name_space = fresh_namespace() + std::string(" \0\r\n", 4);
    const record_key key(name_space, scope::tenant(std::string("t \r\n\0 \xc3\xa9", 8)),
                         std::string("k\0ey\r\n*1\r\n$3\r\n with spaces \xe2\x82\xac \xf0\x9f\x94\x91", 35));
    const std::string payload = every_byte_value(1 << 20);
    CHECK(payload.find('\0') != std::string::npos);
    for (int b = 0; b < 256; ++b) REQUIRE(payload.find(static_cast<char>(b)) != std::string::npos);
    const std::string fingerprint("fp\0\r\n \xff", 7);

    auto r = store.try_reserve(key, fingerprint, 1min);
    REQUIRE(r.status == status::reserved);
    REQUIRE(store.complete(key, r.token, fingerprint, payload, 1min));
    auto replay = store.try_reserve(key, fingerprint, 1min);
    REQUIRE(replay.status == status::completed);
    CHECK(replay.payload.size() == payload.size());
    CHECK(replay.payload == payload);
    CHECK(store.try_reserve(key, std::string("fp\0\r\n \xfe", 7), 1min).status == status::fingerprint_mismatch);

    // Stored under exactly the storage key's bytes, as the hash the scripts describe.
    test::redis_client raw(test::shared_redis());
    const std::string storage_key = key.to_storage_key();
    CHECK(raw.text({"TYPE", storage_key}) == "hash");
    CHECK(raw.text({"HGET", storage_key, "t"}) == r.token);
    CHECK(raw.text({"HGET", storage_key, "f"}) == fingerprint);
    CHECK(raw.text({"HGET", storage_key, "p"}) == payload);
    // A key that differs only after the NUL is another key.
    const record_key truncated(name_space, scope::tenant(std::string("t \r\n\0 \xc3\xa9", 8)), "k");
    CHECK(store.try_reserve(truncated, fingerprint, 1min).status == status::reserved);
}

TEST_CASE("redis: an entry is a hash t, f (and p once completed) whose TTL is the lease, then the retention") {
    redis_store store(test::shared_redis_options());
    const record_key key(fresh_namespace(), "ttl");
    test::redis_client raw(test::shared_redis());
    const std::string storage_key = key.to_storage_key();

    auto r = store.try_reserve(key, "fp", 2h);
    REQUIRE(r.status == status::reserved);
    CHECK(raw.text({"HLEN", storage_key}) == "2");
    CHECK(raw.text({"HEXISTS", storage_key, "p"}) == "0");
    const long long lease_ttl = std::stoll(raw.text({"PTTL", storage_key}));
    CHECK(lease_ttl > 7'190'000);
    CHECK(lease_ttl <= 7'200'000);

    REQUIRE(store.complete(key, r.token, "fp", "", 3h));
    CHECK(raw.text({"HLEN", storage_key}) == "3");
    CHECK(raw.text({"HEXISTS", storage_key, "p"}) == "1");
    const long long retention_ttl = std::stoll(raw.text({"PTTL", storage_key}));
    CHECK(retention_ttl > 10'790'000);
    CHECK(retention_ttl <= 10'800'000);

    // The longest lease idem accepts (100 years) is still a valid PEXPIRE.
    const record_key forever(key.name_space(), "forever");
    CHECK(store.try_reserve(forever, "fp", max_duration).status == status::reserved);
    CHECK(std::stoll(raw.text({"PTTL", forever.to_storage_key()})) > 3'155'000'000'000);
    CHECK(raw.text({"DEL", storage_key, forever.to_storage_key()}) == "2");  // a shared server keeps no leftovers
}

TEST_CASE("redis: leases and retention are whole milliseconds rounded up, never 0") {
    using redis_detail::pexpire_milliseconds;
    CHECK(pexpire_milliseconds(1ns) == 1);
    CHECK(pexpire_milliseconds(999'999ns) == 1);
    CHECK(pexpire_milliseconds(1ms) == 1);
    CHECK(pexpire_milliseconds(1ms + 1ns) == 2);
    CHECK(pexpire_milliseconds(2h) == 7'200'000);
    CHECK(pexpire_milliseconds(duration::max()) == 9'223'372'036'855);

    // A one-nanosecond lease is a real (1 ms) lease: the key is taken, then free again.
    redis_store store(test::shared_redis_options());
    const record_key key(fresh_namespace(), "tiny");
    auto r = store.try_reserve(key, "fp", 1ns);
    REQUIRE(r.status == status::reserved);
    std::this_thread::sleep_for(20ms);
    CHECK(store.try_reserve(key, "fp", 1min).status == status::reserved);
}

TEST_CASE("redis: the key prefix and the database number separate ledgers") {
    const std::string name_space = fresh_namespace();
    const record_key key(name_space, scope::user("u"), "k");
    auto options = test::shared_redis_options();
    redis_store plain(options);
    options.key_prefix = "app1:";
    redis_store prefixed(options);
    options.key_prefix = std::string(record_key::default_prefix);
    options.database = 5;
    redis_store other_database(options);

    for (auto* store : {&plain, &prefixed, &other_database}) {
        auto r = store->try_reserve(key, "fp", 1min);
        CHECK(r.status == status::reserved);
        CHECK(store->try_reserve(key, "fp", 1min).status == status::in_flight);
    }
    test::redis_client raw(test::shared_redis());
    CHECK(raw.text({"EXISTS", key.to_storage_key("app1:")}) == "1");
    CHECK(raw.text({"EXISTS", key.to_storage_key()}) == "1");
    REQUIRE(raw.text({"SELECT", "5"}) == "OK");
    CHECK(raw.text({"EXISTS", key.to_storage_key()}) == "1");
    CHECK(raw.text({"EXISTS", key.to_storage_key("app1:")}) == "0");
    CHECK(raw.text({"DEL", key.to_storage_key()}) == "1");
}

TEST_CASE("redis: a key holding something this store did not write is corrupt_record, left untouched") {
    redis_store store(test::shared_redis_options());
    const record_key string_key(fresh_namespace(), scope::tenant("secret-tenant"), "secret-key");
    const record_key foreign_hash(fresh_namespace(), "foreign");
    test::redis_client raw(test::shared_redis());
    REQUIRE(raw.text({"SET", string_key.to_storage_key(), "not a hash"}) == "OK");
    REQUIRE(raw.text({"HSET", foreign_hash.to_storage_key(), "x", "y"}) == "1");

    const auto wrong_type = caught_store_error([&] { (void)store.try_reserve(string_key, "fp", 1min); });
    CHECK(wrong_type.failure() == store_failure::corrupt_record);
    CHECK(wrong_type.native_code() == "WRONGTYPE");
    CHECK_FALSE(wrong_type.is_transient());
    const std::string message = wrong_type.what();
    CHECK(message.find(string_key.key_hash()) != std::string::npos);
    CHECK(message.find("secret") == std::string::npos);
    CHECK(message.find(string_key.name_space()) == std::string::npos);
    CHECK(caught_store_error([&] { (void)store.complete(string_key, "tok", "fp", "p", 1min); }).failure() ==
          store_failure::corrupt_record);
    CHECK(caught_store_error([&] { (void)store.release(string_key, "tok"); }).failure() ==
          store_failure::corrupt_record);
    CHECK(raw.text({"GET", string_key.to_storage_key()}) == "not a hash");

    CHECK(caught_store_error([&] { (void)store.try_reserve(foreign_hash, "fp", 1min); }).failure() ==
          store_failure::corrupt_record);
    CHECK(caught_store_error([&] { (void)store.complete(foreign_hash, "tok", "fp", "p", 1min); }).failure() ==
          store_failure::corrupt_record);
    CHECK_FALSE(store.release(foreign_hash, "tok"));
    CHECK(raw.text({"HLEN", foreign_hash.to_storage_key()}) == "1");
    CHECK(raw.text({"HGET", foreign_hash.to_storage_key(), "x"}) == "y");
}

TEST_CASE("redis: forget deletes a completed entry; one in flight only when forced; a foreign key is kept") {
    redis_store store(test::shared_redis_options());
    const std::string ns = fresh_namespace();
    const record_key done(ns, "done"), running(ns, "running"), foreign(ns, "foreign"), text(ns, "text");
    test::redis_client raw(test::shared_redis());
    auto r = store.try_reserve(done, "fp", 1min);
    REQUIRE(store.complete(done, r.token, "fp", std::string("re\0sult", 7), 1h));
    REQUIRE(store.try_reserve(running, "fp", 2min).status == status::reserved);

    CHECK(store.forget(record_key(ns, "never"), true).outcome == forget_outcome::not_found);
    const forget_result completed = store.forget(done, false);
    CHECK(completed.outcome == forget_outcome::deleted);
    CHECK(completed.record.completed);
    CHECK(completed.record.payload_bytes == 7);
    CHECK(completed.record.name_space == ns);
    CHECK(completed.record.expires_at - completed.record.now > 59min);
    CHECK(completed.record.expires_at - completed.record.now <= 1h);
    CHECK(raw.text({"EXISTS", done.to_storage_key()}) == "0");
    CHECK(store.forget(done, false).outcome == forget_outcome::not_found);
    CHECK(store.try_reserve(done, "another fingerprint", 1min).status == status::reserved);

    const forget_result kept = store.forget(running, false);
    CHECK(kept.outcome == forget_outcome::refused_in_flight);
    CHECK_FALSE(kept.record.completed);
    CHECK_FALSE(kept.record.expired());
    CHECK(store.try_reserve(running, "fp", 1min).status == status::in_flight);
    CHECK(store.forget(running, true).outcome == forget_outcome::deleted);
    CHECK(store.try_reserve(running, "fp", 1min).status == status::reserved);

    // What this store did not write stays, as a typed error.
    REQUIRE(raw.text({"HSET", foreign.to_storage_key(), "x", "y"}) == "1");
    REQUIRE(raw.text({"SET", text.to_storage_key(), "not a hash"}) == "OK");
    CHECK(caught_store_error([&] { (void)store.forget(foreign, true); }).failure() == store_failure::corrupt_record);
    CHECK(caught_store_error([&] { (void)store.forget(text, true); }).failure() == store_failure::corrupt_record);
    CHECK(raw.text({"HGET", foreign.to_storage_key(), "x"}) == "y");
    CHECK(raw.text({"GET", text.to_storage_key()}) == "not a hash");
    (void)raw.text(
        {"DEL", done.to_storage_key(), running.to_storage_key(), foreign.to_storage_key(), text.to_storage_key()});
}

TEST_CASE("redis: inspect reads an entry without changing it; a foreign key is a typed error") {
    redis_store store(test::shared_redis_options());
    const std::string ns = fresh_namespace();
    const record_key done(ns, "done"), running(ns, "running"), foreign(ns, "foreign"), text(ns, "text");
    test::redis_client raw(test::shared_redis());
    auto r = store.try_reserve(done, "fp", 1min);
    REQUIRE(store.complete(done, r.token, "fp", std::string("re\0sult", 7), 1h));
    REQUIRE(store.try_reserve(running, "fp", 2min).status == status::reserved);

    CHECK_FALSE(store.inspect(record_key(ns, "never"), true));
    const auto completed = store.inspect(done, true);
    REQUIRE(completed);
    CHECK(completed->completed);
    CHECK(completed->payload_bytes == 7);
    CHECK(completed->payload == std::string("re\0sult", 7));
    CHECK(completed->name_space == ns);
    CHECK(completed->created_at == idem::time_point{});  // Redis keeps no write time
    CHECK(completed->expires_at - completed->now > 59min);
    CHECK(completed->expires_at - completed->now <= 1h);
    const auto in_flight = store.inspect(running, true);
    REQUIRE(in_flight);
    CHECK_FALSE(in_flight->completed);
    CHECK_FALSE(in_flight->payload);
    CHECK(in_flight->expires_at - in_flight->now <= 2min);
    // Reading changed nothing: the same fields and TTLs, the key still in flight.
    CHECK(raw.text({"HLEN", done.to_storage_key()}) == "3");
    CHECK(raw.text({"HLEN", running.to_storage_key()}) == "2");
    CHECK(std::stoll(raw.text({"PTTL", running.to_storage_key()})) > 60'000);
    CHECK(store.try_reserve(running, "fp", 1min).status == status::in_flight);

    REQUIRE(raw.text({"HSET", foreign.to_storage_key(), "x", "y"}) == "1");
    REQUIRE(raw.text({"SET", text.to_storage_key(), "not a hash"}) == "OK");
    CHECK(caught_store_error([&] { (void)store.inspect(foreign, false); }).failure() == store_failure::corrupt_record);
    CHECK(caught_store_error([&] { (void)store.inspect(text, false); }).failure() == store_failure::corrupt_record);
    // A record without a TTL is none this store wrote either.
    REQUIRE(raw.text({"PERSIST", done.to_storage_key()}) == "1");
    CHECK(caught_store_error([&] { (void)store.inspect(done, false); }).failure() == store_failure::corrupt_record);
    (void)raw.text(
        {"DEL", done.to_storage_key(), running.to_storage_key(), foreign.to_storage_key(), text.to_storage_key()});
}

TEST_CASE("redis: bad options are rejected at construction, naming the field") {
    auto rejected = [](const redis_options& options, std::string_view field) {
        try {
            redis_store store(options);
        } catch (const idem::options_error& e) {
            CHECK_MESSAGE(std::string(e.what()).find(field) != std::string::npos, e.what());
            return true;
        }
        return false;
    };
    redis_options o;
    o.host = "";
    CHECK(rejected(o, "host"));
    o = {};
    o.port = 0;
    CHECK(rejected(o, "port"));
    o.port = 65536;
    CHECK(rejected(o, "port"));
    o = {};
    o.connect_timeout = -1ms;
    CHECK(rejected(o, "connect_timeout"));
    o = {};
    o.command_timeout = -5ms;
    CHECK(rejected(o, "command_timeout"));
    o = {};
    o.command_timeout = std::chrono::milliseconds::max();  // its deadline would overflow
    CHECK(rejected(o, "command_timeout"));
    o = {};
    o.pool_size = 0;
    CHECK(rejected(o, "pool_size"));
    o = {};
    o.database = -1;
    CHECK(rejected(o, "database"));
    o = {};
    o.user = "alice";
    CHECK(rejected(o, "password"));
    o = {};
    o.host = std::string("local\0host", 10);
    CHECK(rejected(o, "NUL"));
    o = {};
    o.cluster = true;
    o.unix_socket = "/tmp/redis.sock";
    CHECK(rejected(o, "unix_socket"));
    o = {};
    o.cluster = true;
    o.database = 2;
    CHECK(rejected(o, "database"));
    o = {};
    o.cluster_seeds = {{"127.0.0.1", 7000}};
    CHECK(rejected(o, "without cluster"));
    o.cluster = true;
    o.cluster_seeds = {{"127.0.0.1", 0}};
    CHECK(rejected(o, "cluster_seeds"));
    o.cluster_seeds = {{"", 7000}};
    CHECK(rejected(o, "cluster_seeds"));

    // A unix socket needs no host or port; zero timeouts mean no limit. Nothing connects yet.
    o = {};
    o.host = "";
    o.port = 0;
    o.unix_socket = "/nonexistent/redis.sock";
    o.connect_timeout = 0ms;
    o.command_timeout = 0ms;
    CHECK_NOTHROW(redis_store{o});
}

TEST_CASE("redis: an unreachable server is a typed connection_lost error, never a crash") {
    redis_options options;
    options.port = test::free_loopback_port();  // nothing listens there
    options.connect_timeout = 500ms;
    redis_store store(options);
    const record_key key(fresh_namespace(), "k");
    for (int attempt = 0; attempt < 3; ++attempt) {
        const auto e = caught_store_error([&] { (void)store.try_reserve(key, "fp", 1min); });
        CHECK(e.is_connection_lost());
        CHECK(e.is_transient());
        CHECK(e.failure() == store_failure::connection_lost);
        CHECK(std::string(e.what()).find(key.key_hash()) != std::string::npos);
    }
    CHECK(caught_store_error([&] { (void)store.complete(key, "tok", "fp", "p", 1min); }).is_connection_lost());
    CHECK(caught_store_error([&] { (void)store.release(key, "tok"); }).is_connection_lost());
    CHECK(caught_store_error([&] { store.ping(); }).is_connection_lost());

    options.port = 6379;
    options.unix_socket = "/nonexistent/redis.sock";
    redis_store via_socket(options);
    CHECK(caught_store_error([&] { via_socket.ping(); }).is_connection_lost());
}

TEST_CASE("redis: one connection serves many threads, each key reserved and completed once") {
    auto options = test::shared_redis_options();
    options.pool_size = 1;
    redis_store store(options);
    const std::string name_space = fresh_namespace();
    constexpr int threads = 16;
    constexpr int keys = 40;
    std::vector<std::atomic<int>> reserved(keys);
    std::atomic<int> failures{0};
    {
        std::vector<std::jthread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                for (int i = 0; i < keys; ++i) {
                    const record_key key(name_space, "k" + std::to_string((i + t) % keys));
                    try {
                        auto r = store.try_reserve(key, "fp", 1min);
                        if (r.status != status::reserved) continue;
                        ++reserved[static_cast<std::size_t>((i + t) % keys)];
                        if (!store.complete(key, r.token, "fp", "done", 1min)) ++failures;
                    } catch (const std::exception&) {
                        ++failures;
                    }
                }
            });
        }
    }
    CHECK(failures == 0);
    for (const auto& count : reserved) CHECK(count == 1);
}

TEST_CASE("redis: 4 processes x 16 threads racing one key get exactly one reserved") {
    const auto at = test::shared_redis();
    const std::string name_space = fresh_namespace();
    constexpr int processes = 4;
    constexpr int threads = 16;
    constexpr int rounds = 40;
    std::vector<std::unique_ptr<test::child_process>> workers;
    for (int p = 0; p < processes; ++p) {
        test::spawn_options spawn;
        spawn.argv = {IDEM_REDIS_WORKER, "race", at.host, std::to_string(at.port), name_space, std::to_string(threads)};
        spawn.pipe_stdin = true;
        spawn.pipe_stdout = true;
        workers.push_back(std::make_unique<test::child_process>(std::move(spawn)));
    }
    for (auto& w : workers) REQUIRE(w->read_line(10s) == "ready");

    int exact = 0;
    for (int round = 0; round < rounds; ++round) {
        for (auto& w : workers) w->write(std::to_string(round) + "\n");
        int reserved = 0, in_flight = 0, errors = 0;
        for (auto& w : workers) {
            const auto line = w->read_line(10s);
            REQUIRE(line.has_value());
            std::istringstream fields(*line);
            int echoed = -1, r = 0, f = 0, e = 0;
            fields >> echoed >> r >> f >> e;
            REQUIRE(echoed == round);
            reserved += r;
            in_flight += f;
            errors += e;
        }
        CHECK_MESSAGE(reserved == 1, "round " << round);
        CHECK_MESSAGE(in_flight == processes * threads - 1, "round " << round);
        CHECK(errors == 0);
        exact += reserved == 1 ? 1 : 0;
    }
    for (auto& w : workers) {
        w->close_stdin();
        const int exit_status = w->reap();
        CHECK(WIFEXITED(exit_status));
        CHECK(WEXITSTATUS(exit_status) == 0);
    }
    MESSAGE(processes << " processes x " << threads << " threads, " << rounds << " rounds: exactly one reserved in "
                      << exact << " rounds");
}

// A profile's remembered window on Redis: Redis drops the record at its
// retention by itself; the tombstone, a key of its own with the window's TTL,
// answers until the window ends. The transfer moves money once.
TEST_CASE("redis: a transfer retried after its retention, inside its remembered window, is expired and not run") {
    auto store = std::make_shared<redis_store>(test::shared_redis_options());
    const std::string ns = fresh_namespace();
    executor_options o;
    o.profiles["payments"] = {.lease = 100ms, .retention = 300ms, .remember = 3s};
    executor exec(store, o);
    std::atomic<int> moved{0};
    const auto transfer = [&](const record_key& k, std::string_view fingerprint = "fp") {
        return exec.execute(k, fingerprint, {.profile = "payments"},
                            [&] { return "moved " + std::to_string(++moved); });
    };
    const record_key late(ns, "late"), forgotten(ns, "forgotten");
    REQUIRE(transfer(late).status() == execution_status::executed);
    REQUIRE(transfer(forgotten).status() == execution_status::executed);
    std::this_thread::sleep_for(600ms);  // the retention ended: Redis dropped the records
    CHECK(store->purge_expired(1000) == 0);
    test::redis_client raw(test::shared_redis());
    CHECK(raw.text({"EXISTS", late.to_storage_key()}) == "0");
    CHECK(transfer(late).status() == execution_status::expired);
    CHECK(transfer(late, "other").status() == execution_status::key_reused);
    CHECK(store->try_reserve(late, "fp", 1min).status == status::expired);

    // forget deletes the tombstone alone: the operator lets the key run again.
    const forget_result f = store->forget(forgotten, false);
    CHECK(f.outcome == forget_outcome::tombstone_deleted);
    CHECK(f.tombstone);
    CHECK(f.record.expires_at - f.record.now > 1s);
    CHECK(store->forget(forgotten, false).outcome == forget_outcome::not_found);
    CHECK(transfer(forgotten).status() == execution_status::executed);
    CHECK(moved == 3);

    std::this_thread::sleep_for(3s);  // the window ended: the tombstone's TTL too
    CHECK(transfer(late).status() == execution_status::executed);
    CHECK(moved == 4);
}

TEST_CASE("redis: a tombstone sits in its entry's hash slot, for any namespace's hash tag") {
    for (const std::string ns : {"payments", "orders{customer-42}", "a{b}c{d}"}) {
        for (int i = 0; i < 50; ++i) {
            const record_key k(ns, "k-" + std::to_string(i));
            const std::string entry = k.to_storage_key();
            const std::uint16_t slot = redis_detail::hash_slot(entry);
            const std::string tombstone =
                "idem:v3:t{" + std::string(redis_detail::tag_for_slot(slot)) + "}" + "0123456789abcdef";
            CHECK(redis_detail::hash_slot(tombstone) == slot);
        }
    }
}
