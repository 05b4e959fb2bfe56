// The retrying client against the payments service as a black box: a business
// conflict is answered at once, a duplicate of a running transfer waits for its
// replay, and while the service is SIGKILLed and restarted on the same port
// every transfer is applied exactly once.
#include <doctest/doctest.h>

#include <httplib.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "child_process.hpp"
#include "idem/http/client.hpp"
#include "idem/keys.hpp"
#include "temp_dir.hpp"

using namespace idem;
using namespace std::chrono_literals;

namespace {

class payments_process {
public:
    explicit payments_process(const test::temp_dir& dir, int processing_delay_ms = 20)
        : db_("sqlite:" + (dir.path() / "payments.db").string()), processing_delay_ms_(processing_delay_ms) {
        start(0);
    }
    ~payments_process() {
        process_->signal(SIGTERM);
        if (process_->wait_for_exit(5s) && !test::stopped_cleanly(process_->reap())) ++unclean_exits_;
        CHECK_MESSAGE(unclean_exits_ == 0, unclean_exits_ << " runs of the service exited with a failure");
    }
    void kill_and_restart() {
        process_->signal(SIGKILL);
        if (!test::stopped_cleanly(process_->reap())) ++unclean_exits_;
        start(port_);
    }
    [[nodiscard]] int port() const noexcept { return port_; }

private:
    void start(int port) {
        test::spawn_options o;
        o.argv = {IDEM_PAYMENTS_BINARY,
                  "--db",
                  db_,
                  "--port",
                  std::to_string(port),
                  "--threads",
                  "16",
                  "--processing-delay",
                  std::to_string(processing_delay_ms_)};
        o.pipe_stdout = true;
        process_ = std::make_unique<test::child_process>(std::move(o));
        const auto line = process_->read_line(20s);
        REQUIRE(line.has_value());
        const int bound = std::stoi(line->substr(line->rfind(':') + 1));
        REQUIRE(bound > 0);
        port_ = bound;
    }

    std::string db_;
    int processing_delay_ms_;
    int port_ = 0;
    int unclean_exits_ = 0;
    std::unique_ptr<test::child_process> process_;
};

httplib::Client client_for(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1s);
    c.set_read_timeout(5s);
    return c;
}

long long field(const std::string& json, const std::string& name) {
    const auto at = json.find("\"" + name + "\":");
    REQUIRE(at != std::string::npos);
    return std::stoll(json.substr(at + name.size() + 3));
}

const std::vector<std::pair<std::string, std::string>> auth = {{"Authorization", "Bearer test-client"}};

}  // namespace

TEST_CASE("client: opening an account that exists is answered at once: a business 409 is not sent again") {
    test::temp_dir dir("client-payments");
    payments_process service(dir);
    httplib::Client c = client_for(service.port());
    const http::retry_policy policy{.first_backoff = 10ms, .max_backoff = 50ms, .budget = 10s};
    const std::string body = R"({"id":"carol","balance":100})";
    const auto opened = http::send(c, {.path = "/accounts", .body = body, .headers = auth}, policy);
    REQUIRE(opened.answer);
    REQUIRE(opened.answer->status == 201);

    // Another request (a new key) for the same account: the service's answer is final.
    const auto again = http::send(c, {.path = "/accounts", .body = body, .headers = auth}, policy);
    CHECK(again.status == http::call_status::answered);
    CHECK(again.attempts == 1);
    REQUIRE(again.answer);
    CHECK(again.answer->status == 409);
    CHECK(again.answer->body.find("Payments.AccountExists") != std::string::npos);
    CHECK(again.answer->header("Idempotent-Replayed") != "true");
}

TEST_CASE("client: a duplicate sent while the first transfer still runs ends with the replayed 201, moved once") {
    test::temp_dir dir("client-payments");
    payments_process service(dir, 1500);  // every transfer takes 1.5 s
    httplib::Client c = client_for(service.port());
    const http::retry_policy policy{.first_backoff = 50ms, .max_backoff = 200ms, .budget = 20s};
    for (const auto& [account, balance] : {std::pair{"dave", 1000}, std::pair{"erin", 0}}) {
        const auto r =
            http::send(c,
                       {.path = "/accounts",
                        .body = "{\"id\":\"" + std::string(account) + "\",\"balance\":" + std::to_string(balance) + "}",
                        .headers = auth},
                       policy);
        REQUIRE(r.answer);
        REQUIRE(r.answer->status == 201);
    }
    const http::outgoing_request transfer{
        .path = "/transfers", .body = R"({"from":"dave","to":"erin","amount":250})", .headers = auth};

    // The first attempt, on a connection of its own; the duplicate starts while it runs.
    std::optional<http::call_result> first;
    std::thread original([&] {
        httplib::Client own = client_for(service.port());
        first = http::send(own, transfer, policy);
    });
    std::this_thread::sleep_for(300ms);
    const auto began = std::chrono::steady_clock::now();
    const http::call_result duplicate = http::send(c, transfer, policy);
    const auto waited = std::chrono::steady_clock::now() - began;
    original.join();

    REQUIRE(first);
    CHECK(first->status == http::call_status::answered);
    REQUIRE(first->answer);
    CHECK(first->answer->status == 201);
    // The service runs a transfer and its record in one transaction: the duplicate
    // waits for the first to commit and gets its replay (a 409 Idempotency.InFlight
    // comes only from a lease-mode layer; client_http_test.cpp waits one out).
    MESSAGE("the duplicate took ", duplicate.attempts, " attempt(s)");
    CHECK(duplicate.status == http::call_status::answered);
    REQUIRE(duplicate.answer);
    CHECK(duplicate.answer->status == 201);
    CHECK(duplicate.answer->header("Idempotent-Replayed") == "true");
    CHECK(duplicate.answer->body == first->answer->body);
    CHECK(waited >= 900ms);  // it waited for the first to end rather than run the transfer itself
    auto erin = c.Get("/accounts/erin");
    REQUIRE(erin);
    CHECK(field(erin->body, "balance") == 250);  // moved once
}

TEST_CASE("client: transfers through SIGKILLs and restarts of the payments service are applied exactly once") {
    test::temp_dir dir("client-payments");
    payments_process service(dir);
    const http::retry_policy patient{.max_attempts = 200, .first_backoff = 50ms, .max_backoff = 500ms, .budget = 100s};
    {
        httplib::Client c = client_for(service.port());
        for (const auto& [account, balance] : {std::pair{"alice", 1000000}, std::pair{"bob", 0}}) {
            const std::string opening = balance > 0 ? ",\"balance\":" + std::to_string(balance) : "";
            const auto r = http::send(c,
                                      {.path = "/accounts",
                                       .body = "{\"id\":\"" + std::string(account) + "\"" + opening + "}",
                                       .headers = auth},
                                      patient);
            REQUIRE(r.answer);
            CAPTURE(r.answer->body);
            REQUIRE(r.answer->status == 201);
        }
    }

    struct sent {
        std::string key;
        long long amount;
        http::call_result result;
    };
    std::mutex mutex;
    std::vector<sent> transfers;
    std::vector<std::thread> clients;
    std::atomic<bool> sending{true};  // until the last restart
    const int port = service.port();  // restarts keep it; read here, before they begin
    for (int t = 0; t < 8; ++t) {
        clients.emplace_back([&, t] {
            httplib::Client c = client_for(port);
            for (int i = 0; sending; ++i) {
                const long long amount = 1 + t + 8 * i;
                const http::outgoing_request request{
                    .path = "/transfers",
                    .body = R"({"from":"alice","to":"bob","amount":)" + std::to_string(amount) + "}",
                    .headers = auth};
                http::call_result r = http::send(c, request, patient);
                std::lock_guard lock(mutex);
                transfers.push_back({request.key, amount, std::move(r)});
            }
        });
    }
    std::mt19937 random(std::random_device{}());
    for (int kill = 0; kill < 4; ++kill) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution(200, 500)(random)));
        service.kill_and_restart();
    }
    std::this_thread::sleep_for(200ms);
    sending = false;
    for (auto& c : clients) c.join();

    httplib::Client c = client_for(service.port());
    long long total = 0;
    int retried = 0, replayed = 0;
    REQUIRE(transfers.size() > 8);
    for (const sent& s : transfers) {
        CAPTURE(s.amount);
        REQUIRE(s.result.status == http::call_status::answered);
        REQUIRE(s.result.answer);
        CHECK(s.result.answer->status == 201);
        retried += s.result.attempts > 1 ? 1 : 0;
        replayed += s.result.answer->header("Idempotent-Replayed") == "true" ? 1 : 0;
        // The transfer the service created for this key: its Location, the same in every replay.
        const std::string location(s.result.answer->header("Location"));
        REQUIRE(location.starts_with("/transfers/"));
        auto stored = c.Get(location);
        REQUIRE(stored);
        CHECK(stored->status == 200);
        CHECK(field(stored->body, "amount") == s.amount);
        total += s.amount;
    }
    MESSAGE(transfers.size(), " transfers through 4 SIGKILLs: ", retried, " retried, ", replayed,
            " answered by a replay");
    auto alice = c.Get("/accounts/alice"), bob = c.Get("/accounts/bob");
    REQUIRE(alice);
    REQUIRE(bob);
    CHECK(field(alice->body, "balance") == 1000000 - total);
    CHECK(field(bob->body, "balance") == total);
    CHECK(retried > 0);
}
