// `idem forget --redis` and `idem inspect --redis` on a throwaway redis-server, and the --redis URL grammar.
#include <doctest/doctest.h>

#include <stdexcept>

#include "cli_support.hpp"
#include "idem/redis_store.hpp"
#include "redis_arg.hpp"
#include "redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace idem::test::cli;
using idem::record_key;
using idem::reservation_status;

}  // namespace

TEST_CASE("cli redis: --redis URLs name host, port, database, user and password; bad ones are refused unrepeated") {
    using idem::cli::parse_redis_url;
    const idem::redis_options plain = parse_redis_url("redis://cache.internal");
    CHECK(plain.host == "cache.internal");
    CHECK(plain.port == 6379);
    CHECK(plain.database == 0);
    CHECK(plain.password.empty());
    const idem::redis_options full = parse_redis_url("redis://ops:s%40cr%3At@10.0.0.7:6380/3");
    CHECK(full.host == "10.0.0.7");
    CHECK(full.port == 6380);
    CHECK(full.database == 3);
    CHECK(full.user == "ops");
    CHECK(full.password == "s@cr:t");
    const idem::redis_options v6 = parse_redis_url("redis://:pw@[::1]:7000/");
    CHECK(v6.host == "::1");
    CHECK(v6.port == 7000);
    CHECK(v6.user.empty());
    CHECK(v6.password == "pw");
    for (const char* bad : {"http://h", "redis://", "redis://:6379", "redis://h:0", "redis://h:99999", "redis://h:x",
                            "redis://h/x", "redis://h/-1", "redis://secretpw@h", "redis://u:@h", "redis://u:%zz@h",
                            "redis://u:%00@h", "redis://[::1", "redis://[::1]x", "redis://h?db=1", "redis://h#f"}) {
        try {
            (void)parse_redis_url(bad);
            FAIL_CHECK("accepted: " << bad);
        } catch (const std::invalid_argument& e) {
            const std::string message = e.what();
            CHECK_MESSAGE(message.find("redis://[[USER]:PASSWORD@]HOST") != std::string::npos, bad);
            CHECK_MESSAGE(message.find("secretpw") == std::string::npos, bad);
        }
    }
}

TEST_CASE("cli redis: forget deletes a completed record by its key, keeps one in flight unless --force") {
    const idem::test::redis_endpoint redis = idem::test::shared_redis();
    idem::redis_options options;
    options.host = redis.host;
    options.port = redis.port;
    idem::redis_store store(options);
    const std::string url = "redis://" + redis.host + ":" + std::to_string(redis.port);
    const record_key done = key_of("redis-done", 0), running = key_of("redis-running", 0);
    auto r = store.try_reserve(done, "fp", 1min);
    REQUIRE(store.complete(done, r.token, "fp", "paid", 1h));
    REQUIRE(store.try_reserve(running, "fp", 1h).status == reservation_status::reserved);
    workspace w;
    const std::vector<std::string> named_done{"--namespace", "cli", "--tenant", "acme", "--key", "redis-done-0"};
    auto forget = [&](std::vector<std::string> tail) {
        std::vector<std::string> args{"forget", "--redis", url};
        args.insert(args.end(), tail.begin(), tail.end());
        return w.idem(args);
    };

    outcome o = forget(named_done);
    CHECK(o.exit_code == 0);
    CHECK(o.out.find("deleted the record with key hash " + done.key_hash()) != std::string::npos);
    CHECK(o.out.find("namespace cli, completed") != std::string::npos);
    CHECK(o.out.find("written") == std::string::npos);
    CHECK(store.try_reserve(done, "another fingerprint", 1min).status == reservation_status::reserved);

    o = forget({"--namespace", "cli", "--tenant", "acme", "--key", "redis-running-0"});
    CHECK(o.exit_code == 4);
    CHECK(o.err.find("in flight") != std::string::npos);
    CHECK(store.try_reserve(running, "fp", 1h).status == reservation_status::in_flight);
    o = forget({"--namespace", "cli", "--tenant", "acme", "--key", "redis-running-0", "--force"});
    CHECK(o.exit_code == 0);
    CHECK(o.out.find("(--force)") != std::string::npos);
    CHECK(store.try_reserve(running, "fp", 1h).status == reservation_status::reserved);

    o = forget({"--namespace", "cli", "--tenant", "acme", "--key", "never"});
    CHECK(o.exit_code == 3);

    // A hash cannot find a Redis record; --db and --redis exclude each other; a bad URL is a usage error.
    CHECK(forget({"--key-hash", std::string(64, 'a')}).exit_code == 2);
    CHECK(w.idem({"forget", "--redis", url, "--db", w.db, "--namespace", "cli", "--tenant", "acme", "--key", "k"})
              .exit_code == 2);
    o = w.idem({"forget", "--redis", "redis://:hunter2@127.0.0.1:notaport", "--namespace", "cli", "--tenant", "acme",
                "--key", "k"});
    CHECK(o.exit_code == 2);
    CHECK(o.err.find("hunter2") == std::string::npos);
    CHECK(w.idem({"forget", "--namespace", "cli", "--tenant", "acme", "--key", "k"}).exit_code == 2);
}

TEST_CASE("cli redis: a Redis that is not there is a database error that says what to check") {
    idem::test::redis_server server;
    const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
    server.stop();
    workspace w;
    const outcome o = w.idem({"forget", "--redis", url, "--namespace", "cli", "--tenant", "acme", "--key", "k"});
    CHECK(o.exit_code == 1);
    CHECK(o.err.find("check that Redis is reachable") != std::string::npos);
}

TEST_CASE("cli redis: inspect shows a record by its key, the payload only with --payload; lists are for SQL stores") {
    const idem::test::redis_endpoint redis = idem::test::shared_redis();
    idem::redis_options options;
    options.host = redis.host;
    options.port = redis.port;
    idem::redis_store store(options);
    const std::string url = "redis://" + redis.host + ":" + std::to_string(redis.port);
    const record_key done = key_of("redis-inspect-done", 0), running = key_of("redis-inspect-running", 0);
    const std::string payload("{\"receipt\":1}\0\xff", 15);
    auto r = store.try_reserve(done, "fp", 1min);
    REQUIRE(store.complete(done, r.token, "fp", payload, 1h));
    REQUIRE(store.try_reserve(running, "fp", 10min).status == reservation_status::reserved);
    workspace w;
    auto inspect = [&](std::vector<std::string> tail) {
        std::vector<std::string> args{"inspect", "--redis", url};
        args.insert(args.end(), tail.begin(), tail.end());
        return w.idem(args);
    };

    outcome o = inspect({"--namespace", "cli", "--tenant", "acme", "--key", "redis-inspect-done-0"});
    CAPTURE(o.err);
    REQUIRE(o.exit_code == 0);
    CHECK(contains(o.out, "key hash:       " + done.key_hash()));
    CHECK(contains(o.out, "digest:         " + digest_hex(done)));
    CHECK(contains(o.out, "namespace:      cli\n"));
    CHECK(contains(o.out, "state:          completed\n"));
    CHECK(contains(o.out, "retention left: 59m"));
    CHECK(contains(o.out, "payload:        15 bytes\n"));
    CHECK(!contains(o.out, "SQL key_hash"));  // Redis keys records by their text
    CHECK(!contains(o.out, "created"));       // and keeps no write time
    CHECK(!contains(o.out, "receipt"));
    CHECK(!contains(o.out, "acme"));

    o = inspect({"--namespace", "cli", "--tenant", "acme", "--key", "redis-inspect-done-0", "--payload"});
    CHECK(o.exit_code == 0);
    CHECK(o.out == payload);  // stdout: the payload alone, byte for byte
    CHECK(contains(o.err, "state:          completed"));

    o = inspect({"--namespace", "cli", "--tenant", "acme", "--key", "redis-inspect-running-0"});
    CHECK(o.exit_code == 0);
    CHECK(contains(o.out, "state:          in flight\n"));
    CHECK(contains(o.out, "lease left:     9m"));
    CHECK(contains(o.out, "payload:        none (in flight)"));
    // Inspecting changed nothing.
    CHECK(store.try_reserve(running, "fp", 10min).status == reservation_status::in_flight);
    CHECK(store.try_reserve(done, "fp", 10min).payload == payload);

    o = inspect({"--namespace", "cli", "--tenant", "acme", "--key", "never"});
    CHECK(o.exit_code == 3);
    CHECK(contains(o.err, "no record with key hash"));
    CHECK(!contains(o.err, "operation"));

    // A hash cannot find a Redis record; Redis lists nothing; --db and --redis exclude each other.
    o = inspect({"--key-hash", std::string(64, 'a')});
    CHECK(o.exit_code == 2);
    CHECK(contains(o.err, "by its key, not its hash"));
    o = inspect({"--namespace", "cli", "--since", "1h"});
    CHECK(o.exit_code == 2);
    CHECK(contains(o.err, "Redis keeps no write time"));
    CHECK(inspect({"--namespace", "cli", "--recent", "5"}).exit_code == 2);
    CHECK(w.idem({"inspect", "--redis", url, "--db", w.db, "--namespace", "cli", "--tenant", "acme", "--key", "k"})
              .exit_code == 2);
    CHECK(w.idem({"inspect", "--namespace", "cli", "--tenant", "acme", "--key", "k"}).exit_code == 2);
    o = w.idem({"inspect", "--redis", "redis://:hunter2@127.0.0.1:notaport", "--namespace", "cli", "--tenant", "acme",
                "--key", "k"});
    CHECK(o.exit_code == 2);
    CHECK(!contains(o.err, "hunter2"));
    (void)store.forget(done, true);
    (void)store.forget(running, true);
}

TEST_CASE("cli redis: inspect on a Redis that is not there is a database error that says what to check") {
    idem::test::redis_server server;
    const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
    server.stop();
    workspace w;
    const outcome o = w.idem({"inspect", "--redis", url, "--namespace", "cli", "--tenant", "acme", "--key", "k"});
    CHECK(o.exit_code == 1);
    CHECK(contains(o.err, "check that Redis is reachable"));
}
