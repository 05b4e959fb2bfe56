// The payments service under hostile input, contention and crashes: bounded
// money, NUL bytes refused, conflicts retried instead of answered 500, and a
// process SIGKILLed at each step of a transfer leaving the one true answer.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <barrier>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "idem/webhook.hpp"
#include "payments_service.hpp"
#ifdef IDEM_PAYMENTS_POSTGRESQL
#include <libpq-fe.h>
#endif

using namespace std::chrono_literals;
using idem::test::payments_service;

namespace {

std::string unique(const std::string& prefix) {
    thread_local std::mt19937_64 random{std::random_device{}()};  // one per client thread
    return prefix + std::to_string(random() % 1000000000);
}

// Every status the requests got, counted.
struct tally {
    std::mutex mutex;
    std::map<int, int> statuses;
    std::map<int, std::string> sample;  // a body per status, for the failure message
    void add(const httplib::Result& r) {
        std::lock_guard lock(mutex);
        const int status = r ? r->status : -1;
        ++statuses[status];
        sample.emplace(status, r ? r->body : httplib::to_string(r.error()));
    }
};

// Sends `request` as it is and returns the status of the answer (-1 for none).
int raw_status(int port, const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(static_cast<std::uint16_t>(port));
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int status = -1;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) == 0 &&
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
        char head[64] = {};
        if (::recv(fd, head, sizeof head - 1, MSG_WAITALL) > 12) status = std::atoi(head + 9);  // "HTTP/1.1 400"
    }
    ::close(fd);
    return status;
}

}  // namespace

TEST_CASE("payments: money is bounded integer cents, checked before any write") {
    payments_service svc;
    const std::string full = unique("full-"), empty = unique("empty-");
    svc.open(full, 1'000'000'000'000'000);  // the largest balance an account may hold
    svc.open(empty, 0);

    auto r = svc.post("/transfers", svc.transfer_body(empty, full, 1), {{"Idempotency-Key", unique("k-")}});
    REQUIRE(r);
    CHECK(r->status == 422);  // insufficient funds: nothing written
    // A credit past the limit is refused before anything is written (SQLite once turned this into REAL).
    const std::string giver = unique("giver-");
    svc.open(giver, 500);
    r = svc.post("/transfers", svc.transfer_body(giver, full, 5), {{"Idempotency-Key", unique("k-")}});
    REQUIRE(r);
    CHECK(r->status == 422);
    CHECK(r->body.find("Payments.BalanceLimit") != std::string::npos);
    CHECK(svc.balance(full) == 1'000'000'000'000'000);
    CHECK(svc.balance(giver) == 500);

    // Out-of-range and non-integer amounts: refused, nothing stored.
    for (const std::string amount :
         {"9223372036854775807", "9223372036854775808", "1e20", "1.5", "\"5\"", "-5", "0", "1000000000001"}) {
        CAPTURE(amount);
        auto bad =
            svc.post("/transfers", "{\"from\":\"" + giver + "\",\"to\":\"" + empty + "\",\"amount\":" + amount + "}",
                     {{"Idempotency-Key", unique("k-")}});
        REQUIRE(bad);
        CHECK((bad->status == 400 || bad->status == 422));
        CHECK(bad->get_header_value("Content-Type") == "application/problem+json");
    }
    auto huge = svc.post("/accounts", "{\"id\":\"" + unique("huge-") + "\",\"balance\":9223372036854775807}",
                         {{"Idempotency-Key", unique("k-")}});
    REQUIRE(huge);
    CHECK(huge->status == 422);
    CHECK(svc.balance(giver) == 500);
    CHECK(svc.balance(empty) == 0);
}

TEST_CASE("payments: NUL in any field or header is refused, and nothing is stored") {
    payments_service svc;
    const std::string a = unique("a-"), b = unique("b-");
    svc.open(a, 1000);
    svc.open(b, 0);
    const std::string nul("\0", 1);
    const std::vector<std::string> bodies = {
        "{\"from\":\"" + a + "\\u0000\",\"to\":\"" + b + "\",\"amount\":10}",
        "{\"from\":\"" + a + "\",\"to\":\"" + b + "\\u0000x\",\"amount\":10}",
        "{\"from\":\"" + a + "\",\"to\":\"" + b + "\",\"amount\":10,\"memo\\u0000\":1}",
        "{\"from\":\"" + a + "\",\"to\":\"" + b + "\",\"amount\":10}" + nul,
    };
    for (const auto& body : bodies) {
        auto r = svc.post("/transfers", body, {{"Idempotency-Key", unique("k-")}});
        REQUIRE(r);
        CHECK(r->status == 400);
    }
    auto opened =
        svc.post("/accounts", "{\"id\":\"" + a + "\\u0000\",\"balance\":5}", {{"Idempotency-Key", unique("k-")}});
    REQUIRE(opened);
    CHECK(opened->status == 400);

    // Headers, sent as raw bytes (a client library would cut the value at the NUL): the
    // server keeps a NUL in a value; the service refuses the request before it runs.
    const std::string body = svc.transfer_body(a, b, 10);
    for (const std::string& headers :
         {"Idempotency-Key: k" + nul + "one\r\nAuthorization: Bearer test-client\r\n",
          "Idempotency-Key: " + unique("k-") + "\r\nAuthorization: Bearer test" + nul + "x\r\n"}) {
        const std::string request = "POST /transfers HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers +
                                    "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                                    "\r\n\r\n" + body;
        CHECK(raw_status(svc.port, request) == 400);
    }

    // A signed webhook whose account holds NUL: refused for good (answered 200 so the
    // provider stops), not credited to a prefix of it.
    const std::string event = "{\"id\":\"" + unique("evt-") + "\",\"account\":\"" + b + "\\u0000x\",\"amount\":700}";
    auto hook = svc.deliver(event);
    REQUIRE(hook);
    CHECK(hook->status == 200);
    CHECK(hook->body.find("permanent_failure") != std::string::npos);
    CHECK(svc.balance(a) == 1000);
    CHECK(svc.balance(b) == 0);
}

TEST_CASE("payments: crossing transfers and an overdraw race answer 201 or 422, never 500") {
    payments_service svc;
    const std::string x = unique("x-"), y = unique("y-"), poor = unique("poor-"), sink = unique("sink-");
    svc.open(x, 100000);
    svc.open(y, 100000);
    svc.open(poor, 1000);
    svc.open(sink, 0);
    tally crossing, overdraw;
    {
        constexpr int clients = 40;
        std::barrier start(clients);
        std::vector<std::jthread> threads;
        for (int i = 0; i < clients; ++i)
            threads.emplace_back([&, i] {
                start.arrive_and_wait();
                const bool forward = i % 2 == 0;
                crossing.add(svc.post("/transfers", svc.transfer_body(forward ? x : y, forward ? y : x, 100 + i),
                                      {{"Idempotency-Key", unique("cross-")}}));
            });
    }
    {
        constexpr int clients = 20;
        std::barrier start(clients);
        std::vector<std::jthread> threads;
        for (int i = 0; i < clients; ++i)
            threads.emplace_back([&] {
                start.arrive_and_wait();
                overdraw.add(
                    svc.post("/transfers", svc.transfer_body(poor, sink, 100), {{"Idempotency-Key", unique("od-")}}));
            });
    }
    for (const auto& [status, n] : crossing.statuses)
        MESSAGE("crossing: status " << status << ": " << n << " (" << crossing.sample[status] << ")");
    for (const auto& [status, n] : overdraw.statuses)
        MESSAGE("overdraw: status " << status << ": " << n << " (" << overdraw.sample[status] << ")");
    CHECK(crossing.statuses[201] == 40);
    CHECK(overdraw.statuses[201] == 10);
    CHECK(overdraw.statuses[422] == 10);
    CHECK(svc.balance(x) + svc.balance(y) == 200000);
    CHECK(svc.balance(poor) == 0);
    CHECK(svc.balance(sink) == 1000);
}

namespace {

// A service killed with SIGKILL at `step` of a transfer; then the same key, sent to a
// healthy instance on the same database, gets the one true answer.
void crash_at_each_step(const std::vector<std::string>& steps, int kills_per_step) {
    const std::string options = (std::filesystem::temp_directory_path() / unique("idem-options-")).string() + ".json";
    // A short lease: a crashed request's HTTP reservation frees quickly.
    std::ofstream(options) << R"({"lease": "300ms", "http": {"require_key": true}})";
    payments_service healthy({.extra = {"--options", options}});
    const std::string from = unique("from-"), to = unique("to-");
    healthy.open(from, 1'000'000);
    healthy.open(to, 0);
    long long moved = 0;
    for (const auto& step : steps) {
        for (int kill = 0; kill < kills_per_step; ++kill) {
            CAPTURE(step);
            CAPTURE(kill);
            const std::string key = unique("crash-");
            const long long amount = 1 + kill;
            const std::string body = healthy.transfer_body(from, to, amount);
            {
                payments_service doomed({.db = healthy.db, .extra = {"--options", options}, .crash_at = step});
                auto r = doomed.post("/transfers", body, {{"Idempotency-Key", key}});
                CHECK_FALSE(r);  // killed before it answered
                CHECK(doomed.process->wait_for_exit(5s));
            }
            auto retry = healthy.post("/transfers", body, {{"Idempotency-Key", key}});
            for (int attempt = 0; attempt < 100 && retry && retry->status == 409; ++attempt) {
                std::this_thread::sleep_for(50ms);  // 409: the crashed request's lease has not ended yet
                retry = healthy.post("/transfers", body, {{"Idempotency-Key", key}});
            }
            REQUIRE(retry);
            CHECK(retry->status == 201);
            moved += amount;
            // The one true answer: a replay of it is byte-identical, and the money moved once.
            auto again = healthy.post("/transfers", body, {{"Idempotency-Key", key}});
            CHECK(again->body == retry->body);
            CHECK(healthy.balance(to) == moved);
            CHECK(healthy.balance(from) == 1'000'000 - moved);
        }
    }
    std::filesystem::remove(options);
}

}  // namespace

TEST_CASE("payments: SIGKILL before the writes, after them, after the commit: a retry gives the one answer") {
    crash_at_each_step({"before_writes", "after_writes", "after_commit"}, 20);
}

#ifdef IDEM_PAYMENTS_POSTGRESQL

namespace {

struct pg_connection {
    PGconn* conn;
    explicit pg_connection(const std::string& conninfo) : conn(PQconnectdb(conninfo.c_str())) {
        REQUIRE(PQstatus(conn) == CONNECTION_OK);
    }
    ~pg_connection() { PQfinish(conn); }
    std::string value(const std::string& sql) {
        PGresult* r = PQexec(conn, sql.c_str());
        const ExecStatusType status = PQresultStatus(r);
        std::string v = status == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
        const bool ok = status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK;
        if (!ok) MESSAGE(PQresultErrorMessage(r));
        PQclear(r);
        REQUIRE(ok);
        return v;
    }
};

}  // namespace

TEST_CASE("payments (PostgreSQL): SIGKILL while COMMIT runs on the server: the retry replays what it committed") {
    idem::test::postgres_server server;
    const std::string db = server.conninfo();
    const std::string options = (std::filesystem::temp_directory_path() / unique("idem-options-")).string() + ".json";
    std::ofstream(options) << R"({"lease": "300ms", "http": {"require_key": true}})";
    payments_service healthy({.db = db, .extra = {"--options", options}});
    const std::string from = unique("from-"), to = unique("to-");
    healthy.open(from, 1'000'000);
    healthy.open(to, 0);
    pg_connection admin(db);
    // COMMIT of a transfer of 7777 cents runs this deferred trigger: it waits, so the
    // service can be killed while the server commits.
    admin.value(
        "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.amount = 7777 THEN PERFORM pg_sleep(1); END IF; RETURN NULL; END $$");
    admin.value(
        "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON transfers DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION slow_commit()");
    const std::string body = healthy.transfer_body(from, to, 7777);
    for (int kill = 0; kill < 5; ++kill) {
        CAPTURE(kill);
        const std::string key = unique("commit-");
        {
            payments_service doomed({.db = db, .extra = {"--options", options}});
            std::jthread request([&] { (void)doomed.post("/transfers", body, {{"Idempotency-Key", key}}); });
            bool committing = false;
            for (int i = 0; i < 250 && !committing; ++i) {
                committing = admin.value("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'") == "1";
                if (!committing) std::this_thread::sleep_for(10ms);
            }
            REQUIRE(committing);
            doomed.process->signal(SIGKILL);
            CHECK(doomed.process->wait_for_exit(5s));
        }
        // The server finishes the COMMIT it was running: the transfer happened once.
        while (admin.value("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'") != "0")
            std::this_thread::sleep_for(20ms);
        auto retry = healthy.post("/transfers", body, {{"Idempotency-Key", key}});
        for (int attempt = 0; attempt < 100 && retry && retry->status == 409; ++attempt) {
            std::this_thread::sleep_for(50ms);
            retry = healthy.post("/transfers", body, {{"Idempotency-Key", key}});
        }
        REQUIRE(retry);
        CHECK(retry->status == 201);
        CHECK(healthy.balance(to) == 7777 * (kill + 1));
    }
    std::filesystem::remove(options);
}

TEST_CASE("payments (PostgreSQL): service resumes within 5 s of a server restart, nothing lost, nothing twice") {
    idem::test::postgres_server server;
    const std::string options = (std::filesystem::temp_directory_path() / unique("idem-options-")).string() + ".json";
    // A short lease: a request whose COMMIT answer was lost frees its key soon.
    std::ofstream(options) << R"({"lease": "2s", "http": {"require_key": true}})";
    payments_service svc({.db = server.conninfo(), .extra = {"--options", options}});
    const std::string from = unique("from-"), to = unique("to-");
    svc.open(from, 1'000'000);
    svc.open(to, 0);
    std::atomic<bool> stop{false}, server_back{false};
    std::atomic<long long> first_success_after_back_ms{-1};
    std::atomic<int> done{0}, server_errors{0};
    const auto back_at = std::make_shared<std::atomic<long long>>(0);
    auto now_ms = [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    };
    std::vector<std::jthread> clients;
    for (int c = 0; c < 4; ++c)
        clients.emplace_back([&, c] {
            for (int n = 0; !stop; ++n) {
                const std::string key = "restart-" + std::to_string(c) + "-" + std::to_string(n);
                // A client retries with the same key until the service answers for it.
                const auto give_up = std::chrono::steady_clock::now() + 30s;
                for (;;) {
                    auto r = svc.post("/transfers", svc.transfer_body(from, to, 1), {{"Idempotency-Key", key}});
                    if (r && r->status == 201) break;
                    // 503: rolled back, retry now; 409: still held; 500: a COMMIT whose answer was lost.
                    if (r)
                        CHECK_MESSAGE((r->status == 503 || r->status == 409 || r->status == 500),
                                      r->status << " " << r->body);
                    if (r && r->status == 500) ++server_errors;
                    REQUIRE(std::chrono::steady_clock::now() < give_up);
                    std::this_thread::sleep_for(50ms);
                }
                ++done;
                if (server_back && first_success_after_back_ms < 0)
                    first_success_after_back_ms = now_ms() - back_at->load();
            }
        });
    std::this_thread::sleep_for(500ms);
    server.stop();
    std::this_thread::sleep_for(1s);
    server.start();
    back_at->store(now_ms());
    server_back = true;
    for (int i = 0; i < 100 && first_success_after_back_ms < 0; ++i) std::this_thread::sleep_for(100ms);
    std::this_thread::sleep_for(500ms);
    stop = true;
    clients.clear();
    MESSAGE("transfers: " << done.load() << ", first success " << first_success_after_back_ms.load()
                          << " ms after the server was back; in-doubt answers: " << server_errors.load());
    std::filesystem::remove(options);
    CHECK(first_success_after_back_ms >= 0);
    CHECK(first_success_after_back_ms < 5000);
    CHECK(svc.balance(to) == done);
    CHECK(svc.balance(from) == 1'000'000 - done);
}

#endif

TEST_CASE("payments: SIGHUP reloads the options file: the next request runs in the new mode, no restart") {
    const std::string options = (std::filesystem::temp_directory_path() / unique("idem-options-")).string() + ".json";
    auto write_mode = [&](const char* mode) {
        std::ofstream(options) << R"({"mode": ")" << mode << R"(", "http": {"require_key": true}})";
    };
    write_mode("enforce");
    payments_service svc({.extra = {"--options", options}});
    const std::string from = unique("from-"), to = unique("to-");
    svc.open(from, 1000);
    svc.open(to, 0);
    const std::string body = svc.transfer_body(from, to, 10), key = unique("hup-");
    // Which options are in force, asked without moving money: a transfer with no key and
    // an amount of zero is refused by the layer (400, the key is required) in enforce, and
    // by the service's own checks (422) when idem steps aside. The reload happens on the
    // service's own thread, so wait for the answer to change (bounded).
    auto wait_until_probe_answers = [&](int status) {
        int answer = 0;
        for (int i = 0; i < 1000 && answer != status; ++i) {
            if (i > 0) std::this_thread::sleep_for(10ms);
            auto r = svc.post("/transfers", svc.transfer_body(from, to, 0), {});
            answer = r ? r->status : 0;
        }
        return answer;
    };
    REQUIRE(wait_until_probe_answers(400) == 400);
    CHECK(svc.post("/transfers", body, {{"Idempotency-Key", key}})->status == 201);
    auto replay = svc.post("/transfers", body, {{"Idempotency-Key", key}});
    CHECK(replay->get_header_value("Idempotent-Replayed") == "true");
    CHECK(svc.balance(to) == 10);

    // Off: idem steps aside, so the same key runs again (what a rollout's first step looks like).
    write_mode("off");
    svc.process->signal(SIGHUP);
    REQUIRE(wait_until_probe_answers(422) == 422);
    auto again = svc.post("/transfers", body, {{"Idempotency-Key", key}});
    REQUIRE(again);
    CHECK(again->status == 201);
    CHECK(again->get_header_value("Idempotent-Replayed") != "true");
    CHECK(svc.balance(to) == 20);

    // An invalid file is refused: the options in force (off) stay, and the service keeps serving.
    std::ofstream(options) << R"({"mode": "sometimes"})";
    svc.process->signal(SIGHUP);
    std::this_thread::sleep_for(200ms);  // whether or not it was read by now, off stays
    CHECK(wait_until_probe_answers(422) == 422);
    CHECK(svc.post("/transfers", body, {{"Idempotency-Key", key}})->status == 201);
    CHECK(svc.balance(to) == 30);

    write_mode("enforce");
    svc.process->signal(SIGHUP);
    REQUIRE(wait_until_probe_answers(400) == 400);
    auto enforced = svc.post("/transfers", body, {{"Idempotency-Key", key}});
    REQUIRE(enforced);
    CHECK(enforced->get_header_value("Idempotent-Replayed") == "true");  // the record kept from before
    CHECK(svc.balance(to) == 30);
    std::filesystem::remove(options);
}
