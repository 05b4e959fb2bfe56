// Redis-store tests that start, stop, pause and configure their own redis-server.
// They cannot run against IDEM_TEST_REDIS: this binary then reports itself skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "helpers.hpp"
#include "idem/redis_store.hpp"
#include "redis_server.hpp"

using namespace idem;
using namespace std::chrono_literals;
using status = reservation_status;
using test::caught_store_error;
using test::fresh_namespace;

namespace {

redis_options options_for(const test::redis_server& server) {
    redis_options options;
    options.port = server.port();
    options.connect_timeout = 500ms;
    options.command_timeout = 500ms;
    return options;
}

// How many times the server ran `command` since its statistics were reset.
long long calls(test::redis_client& raw, const std::string& command) {
    std::istringstream info(raw.text({"INFO", "commandstats"}));
    const std::string prefix = "cmdstat_" + command + ":calls=";
    for (std::string line; std::getline(info, line);)
        if (line.starts_with(prefix)) return std::stoll(line.substr(prefix.size()));
    return 0;
}

}  // namespace

TEST_CASE("redis outage: a reservation survives a restart; calls during the outage are connection_lost") {
    test::redis_server server;
    redis_store store(options_for(server));
    const std::string name_space = fresh_namespace();
    const record_key held(name_space, "held"), done(name_space, "done"), other(name_space, "other");
    auto r = store.try_reserve(held, "fp", 1min);
    REQUIRE(r.status == status::reserved);
    auto d = store.try_reserve(done, "fp", 1min);
    REQUIRE(store.complete(done, d.token, "fp", "receipt", 1min));

    server.stop(test::redis_server::keep_data);
    for (const auto& e :
         {caught_store_error([&] { (void)store.try_reserve(other, "fp", 1min); }),
          caught_store_error([&] { (void)store.complete(held, r.token, "fp", "x", 1min); }),
          caught_store_error([&] { (void)store.release(held, r.token); }), caught_store_error([&] { store.ping(); })}) {
        CHECK(e.is_connection_lost());
        CHECK(e.failure() == store_failure::connection_lost);
    }

    server.start();
    // The pooled connections died with the old server: dropped unused, so the very first call succeeds.
    CHECK(store.try_reserve(held, "fp", 1min).status == status::in_flight);
    auto replay = store.try_reserve(done, "fp", 1min);
    CHECK(replay.status == status::completed);
    CHECK(replay.payload == "receipt");
    CHECK(store.complete(held, r.token, "fp", "after the restart", 1min));
    CHECK(store.try_reserve(held, "fp", 1min).payload == "after the restart");
    CHECK(store.try_reserve(other, "fp", 1min).status == status::reserved);

    // Without persistence a restart forgets every key: that key can run again.
    server.stop(test::redis_server::drop_data);
    server.start();
    CHECK(store.try_reserve(held, "fp", 1min).status == status::reserved);
}

TEST_CASE("redis outage: a server restarted mid-run gives typed errors, then recovers, never a duplicate") {
    test::redis_server server;
    auto options = options_for(server);
    options.pool_size = 4;
    redis_store store(options);
    const std::string name_space = fresh_namespace();
    constexpr int threads = 8;
    constexpr int keys = 400;
    enum phase : int { before, down, after };
    std::atomic<int> now{before};
    std::atomic<bool> stop{false};
    std::vector<std::atomic<int>> reserved(keys);
    std::array<std::atomic<int>, 3> ok{}, lost{}, other_errors{};
    std::atomic<int> wrong_replays{0};
    {
        std::vector<std::jthread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                std::minstd_rand random(static_cast<unsigned>(t + 1));
                while (!stop) {
                    const int k = static_cast<int>(random() % keys);
                    const record_key key(name_space, "k" + std::to_string(k));
                    const int started = now;
                    try {
                        auto r = store.try_reserve(key, "fp", 1min);
                        if (r.status == status::reserved) {
                            ++reserved[static_cast<std::size_t>(k)];
                            (void)store.complete(key, r.token, "fp", "result " + std::to_string(k), 1min);
                        } else if (r.status == status::completed && r.payload != "result " + std::to_string(k)) {
                            ++wrong_replays;
                        }
                        ++ok[static_cast<std::size_t>(started)];
                    } catch (const store_error& e) {
                        ++(e.is_connection_lost() ? lost : other_errors)[static_cast<std::size_t>(started)];
                        if (!e.is_connection_lost()) MESSAGE(e.what());
                    } catch (const std::exception& e) {
                        ++other_errors[static_cast<std::size_t>(started)];
                        MESSAGE(e.what());
                    }
                }
            });
        }
        std::this_thread::sleep_for(150ms);
        server.stop(test::redis_server::keep_data);
        now = down;
        std::this_thread::sleep_for(300ms);
        server.start();
        now = after;
        std::this_thread::sleep_for(300ms);
        stop = true;
    }
    for (const auto& count : other_errors) CHECK(count == 0);
    CHECK(wrong_replays == 0);
    CHECK(ok[before] > 0);
    CHECK(lost[down] > 0);
    CHECK(ok[after] > 0);
    CHECK(lost[after] == 0);  // once the server answers again, every call does
    int twice = 0;
    for (const auto& count : reserved) twice += count > 1 ? 1 : 0;
    CHECK(twice == 0);
    MESSAGE("restart mid-run: " << ok[before].load() << " calls before, " << lost[down].load()
                                << " connection_lost during (" << ok[down].load() << " succeeded once it was back), "
                                << ok[after].load() << " after; keys reserved twice: " << twice);
}

TEST_CASE("redis outage: a paused server times out as connection_lost; the store recovers when it resumes") {
    test::redis_server server;
    auto options = options_for(server);
    options.command_timeout = 200ms;
    redis_store store(options);
    const record_key key(fresh_namespace(), "paused");
    REQUIRE(store.try_reserve(record_key(key.name_space(), "loads the script"), "fp", 1min).status == status::reserved);

    server.process().signal(SIGSTOP);
    const auto started = std::chrono::steady_clock::now();
    const auto e = caught_store_error([&] { (void)store.try_reserve(key, "fp", 1min); });
    const auto waited = std::chrono::steady_clock::now() - started;
    server.process().signal(SIGCONT);
    CHECK(e.is_connection_lost());
    CHECK(waited >= 150ms);
    CHECK(waited < 2s);

    // The lost call's outcome was unknown: it ran once the server resumed. It is not run twice.
    std::this_thread::sleep_for(100ms);
    CHECK(store.try_reserve(key, "fp", 1min).status == status::in_flight);
}

TEST_CASE("redis: password, ACL user, database and unix socket") {
    test::redis_server server({"--requirepass", "s3cret", "--user", "idem", "on", ">pw", "~*", "&*", "+@all"});
    const record_key key(fresh_namespace(), "auth");
    auto refused = [&](redis_options o, std::string_view code) {
        redis_store store(o);
        const auto e = caught_store_error([&] { store.ping(); });
        CHECK_FALSE(e.is_connection_lost());
        CHECK(e.failure() == store_failure::other);
        CHECK(e.native_code() == code);
        CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
    };
    auto o = options_for(server);
    refused(o, "NOAUTH");
    o.password = "wrong";
    refused(o, "WRONGPASS");
    o.user = "idem";
    o.password = "s3cret";
    refused(o, "WRONGPASS");

    o.user = "";
    o.password = "s3cret";
    redis_store by_password(o);
    CHECK(by_password.try_reserve(key, "fp", 1min).status == status::reserved);
    o.user = "idem";
    o.password = "pw";
    redis_store by_user(o);
    CHECK(by_user.try_reserve(key, "fp", 1min).status == status::in_flight);

    o.database = 3;
    redis_store on_database(o);
    CHECK(on_database.try_reserve(key, "fp", 1min).status == status::reserved);
    o.database = 999;
    refused(o, "ERR");

    o = {};
    o.unix_socket = server.unix_socket();
    o.password = "s3cret";
    redis_store by_socket(o);
    CHECK(by_socket.try_reserve(key, "fp", 1min).status == status::in_flight);
}

TEST_CASE("redis: scripts are loaded once and run by SHA; a flushed script cache costs one EVAL") {
    test::redis_server server;
    redis_store store(options_for(server));
    test::redis_client raw(server.endpoint());
    const std::string name_space = fresh_namespace();
    REQUIRE(raw.text({"CONFIG", "RESETSTAT"}) == "OK");

    auto first = store.try_reserve(record_key(name_space, "first"), "fp", 1min);
    REQUIRE(first.status == status::reserved);
    CHECK(calls(raw, "eval") == 1);  // a fresh server does not know the script yet

    REQUIRE(raw.text({"CONFIG", "RESETSTAT"}) == "OK");
    for (int i = 0; i < 10; ++i) {
        const record_key key(name_space, "k" + std::to_string(i));
        auto r = store.try_reserve(key, "fp", 1min);
        REQUIRE(r.status == status::reserved);
        if (i % 2 == 0)
            CHECK(store.complete(key, r.token, "fp", "p", 1min));
        else
            CHECK(store.release(key, r.token));
    }
    CHECK(calls(raw, "eval") == 2);      // complete and release, each once
    CHECK(calls(raw, "evalsha") == 20);  // every call by SHA first, the two answered NOSCRIPT included

    REQUIRE(raw.text({"SCRIPT", "FLUSH"}) == "OK");
    REQUIRE(raw.text({"CONFIG", "RESETSTAT"}) == "OK");
    CHECK(store.try_reserve(record_key(name_space, "first"), "fp", 1min).status == status::in_flight);
    CHECK(store.try_reserve(record_key(name_space, "second"), "fp", 1min).status == status::reserved);
    CHECK(calls(raw, "eval") == 1);
    CHECK(calls(raw, "evalsha") == 2);
}

TEST_CASE("redis: a server that drops the connection mid-write gives a typed error, not SIGPIPE") {
    test::redis_server server;
    test::redis_client raw(server.endpoint());
    // A bulk argument above this limit makes Redis answer an error and close the
    // connection while the client is still writing: the client's next write hits a
    // broken pipe (on a unix socket at once; on TCP after the reset).
    REQUIRE(raw.text({"CONFIG", "SET", "proto-max-bulk-len", "1mb"}) == "OK");
    auto tcp = options_for(server);
    auto local = tcp;
    local.unix_socket = server.unix_socket();
    for (const auto& options : {tcp, local}) {
        redis_store store(options);
        const record_key key(fresh_namespace(), "big");
        auto r = store.try_reserve(key, "fp", 1min);
        REQUIRE(r.status == status::reserved);
        const std::string huge(8 << 20, 'x');
        for (int attempt = 0; attempt < 3; ++attempt) {
            const auto e = caught_store_error([&] { (void)store.complete(key, r.token, "fp", huge, 1min); });
            CHECK(e.is_connection_lost());
        }
        CHECK(store.try_reserve(key, "fp", 1min).status == status::in_flight);
        CHECK(store.complete(key, r.token, "fp", "small", 1min));
    }
}

TEST_CASE("redis: a master demoted to replica answers READONLY: transient, nothing written, its connection dropped") {
    test::redis_server master;
    test::redis_server replica({"--replicaof", "127.0.0.1", std::to_string(master.port())});
    redis_store store(options_for(replica));
    store.ping();
    test::redis_client raw(replica.endpoint());
    const auto clients = [&] {
        std::istringstream info(raw.text({"INFO", "clients"}));
        for (std::string line; std::getline(info, line);)
            if (line.starts_with("connected_clients:")) return std::stoi(line.substr(18));
        return -1;
    };
    const int with_store = clients();
    const record_key key(fresh_namespace(), "k");

    const auto e = caught_store_error([&] { (void)store.try_reserve(key, "fp", 1min); });
    CHECK(e.is_transient());
    CHECK(e.native_code() == "READONLY");
    CHECK(raw.text({"EXISTS", key.to_storage_key()}) == "0");
    // The store closed that connection, so after a Sentinel failover the next one can reach the new master.
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (clients() != with_store - 1 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    CHECK(clients() == with_store - 1);

    REQUIRE(raw.text({"REPLICAOF", "NO", "ONE"}) == "OK");  // promoted, as Sentinel would
    CHECK(store.try_reserve(key, "fp", 1min).status == status::reserved);
}

TEST_CASE("test servers run as the unprivileged user; a SIGKILLed test leaves no server and no folder") {
    test::spawn_options spawn;
    spawn.argv = {IDEM_REDIS_WORKER, "hold-server"};
    spawn.pipe_stdin = true;
    spawn.pipe_stdout = true;
    test::child_process holder(std::move(spawn));
    const auto line = holder.read_line(15s);
    REQUIRE(line.has_value());
    std::istringstream fields(*line);
    int port = 0;
    pid_t pid = 0;
    std::string dir;
    fields >> port >> pid >> dir;
    REQUIRE(port > 0);
    REQUIRE(std::filesystem::is_directory(dir));
    test::redis_client(test::redis_endpoint{"127.0.0.1", port}).text({"PING"});

    struct stat folder {};
    REQUIRE(stat(dir.c_str(), &folder) == 0);
    CHECK(folder.st_uid == test::server_user::get().uid);
    std::ifstream status_file("/proc/" + std::to_string(pid) + "/status");
    std::string uid_line;
    while (std::getline(status_file, uid_line) && !uid_line.starts_with("Uid:")) {
    }
    std::istringstream uids(uid_line.substr(4));
    uid_t real = 0, effective = 0;
    uids >> real >> effective;
    CHECK(real == test::server_user::get().uid);
    CHECK(effective == test::server_user::get().uid);

    holder.signal(SIGKILL);
    holder.reap();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while ((!test::process_gone(pid) || std::filesystem::exists(dir)) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    CHECK(test::process_gone(pid));
    CHECK_FALSE(std::filesystem::exists(dir));
}

int main(int argc, char** argv) {
    if (idem::test::external_redis()) {
        std::puts(
            "skipped: these tests stop, pause and reconfigure a redis-server of their own, which they cannot "
            "do to the server IDEM_TEST_REDIS names");
        return 77;  // meson's "skipped"
    }
    doctest::Context context(argc, argv);
    return context.run();
}
