// The retrying client against the payments service as a black box: the service is
// SIGKILLed and restarted on the same port while clients send transfers; every
// transfer is applied exactly once.
#include <doctest/doctest.h>

#include <httplib.h>

#include <atomic>
#include <csignal>
#include <mutex>
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
    explicit payments_process(const test::temp_dir& dir) : db_("sqlite:" + (dir.path() / "payments.db").string()) {
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
        o.argv = {IDEM_PAYMENTS_BINARY, "--db", db_, "--port", std::to_string(port), "--threads", "16",
                  "--processing-delay", "20"};
        o.pipe_stdout = true;
        process_ = std::make_unique<test::child_process>(std::move(o));
        const auto line = process_->read_line(20s);
        REQUIRE(line.has_value());
        const int bound = std::stoi(line->substr(line->rfind(':') + 1));
        REQUIRE(bound > 0);
        port_ = bound;
    }

    std::string db_;
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

}  // namespace

TEST_CASE("client: transfers through SIGKILLs and restarts of the payments service are applied exactly once") {
    test::temp_dir dir("client-payments");
    payments_process service(dir);
    const http::retry_policy patient{.max_attempts = 200, .first_backoff = 50ms, .max_backoff = 500ms, .budget = 100s};
    const std::vector<std::pair<std::string, std::string>> auth = {{"Authorization", "Bearer test-client"}};
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
