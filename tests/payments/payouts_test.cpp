// Payouts in the payments service: an operation in steps (hold, send to a real
// provider on loopback, settle) over HTTP. The answers of the steps form (the
// final response, 202 while it is being completed, the replay); the
// completer's compensation; and the service SIGKILLed between every pair of
// steps and inside the call, hundreds of payouts under load, with the
// completer running: each ends paid, declined or cancelled, the provider
// applied each key at most once, every balance is exact, no step ran twice.
#include <doctest/doctest.h>

#include <httplib.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "payments_service.hpp"
#include "payout_provider.hpp"

using namespace std::chrono_literals;
using idem::test::payments_service;
using idem::test::payout_provider;
using json = nlohmann::json;

namespace {

std::string unique(const std::string& prefix) {
    thread_local std::mt19937_64 random{std::random_device{}()};
    return prefix + std::to_string(random() % 1000000000);
}

std::string fmt_hex(unsigned char c) {
    constexpr const char* digits = "0123456789abcdef";
    return {digits[c >> 4], digits[c & 15]};
}

std::string payout_body(const std::string& account, long long amount, const std::string& destination) {
    return json{{"account", account}, {"amount", amount}, {"destination", destination}}.dump();
}

httplib::Result post_payout(int port, const std::string& key, const std::string& body) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(2s);
    c.set_read_timeout(10s);
    return c.Post("/payouts", {{"Idempotency-Key", key}, {"Authorization", "Bearer test-client"}}, body,
                  "application/json");
}

// Sends the payout again while it answers 202 (or 503), as a client that follows Retry-After does.
httplib::Result until_final(int port, const std::string& key, const std::string& body) {
    auto r = post_payout(port, key, body);
    for (int i = 0; i < 600 && r && (r->status == 202 || r->status == 503); ++i) {
        std::this_thread::sleep_for(50ms);
        r = post_payout(port, key, body);
    }
    return r;
}

}  // namespace

TEST_CASE("payouts: paid, declined or refused; the retry replays; another body under the key is 422") {
    payout_provider provider;
    payments_service svc({.extra = {"--provider", provider.url()}});
    const std::string alice = unique("alice-");
    svc.open(alice, 10'000);

    const std::string body = payout_body(alice, 2'500, "bank-1");
    auto paid = post_payout(svc.port, "po-1", body);
    REQUIRE(paid);
    REQUIRE(paid->status == 201);
    const json p = json::parse(paid->body);
    CHECK(p["status"] == "paid");
    CHECK(paid->get_header_value("Location") == "/payouts/" + p["id"].get<std::string>());
    auto again = post_payout(svc.port, "po-1", body);
    CHECK(again->status == 201);
    CHECK(again->body == paid->body);
    CHECK(again->get_header_value("Idempotent-Replayed") == "true");
    CHECK(svc.balance(alice) == 7'500);
    auto shown = svc.client().Get("/payouts/" + p["id"].get<std::string>());
    REQUIRE(shown);
    CHECK(json::parse(shown->body)["status"] == "paid");
    CHECK(post_payout(svc.port, "po-1", payout_body(alice, 1, "bank-1"))->status == 422);  // KeyReused

    // The provider declines: 422, the hold released.
    auto declined = post_payout(svc.port, "po-2", payout_body(alice, 1'000, "declined-1"));
    CHECK(declined->status == 422);
    CHECK(declined->body.find("Payments.PayoutDeclined") != std::string::npos);
    CHECK(svc.balance(alice) == 7'500);
    // Refused before any call: insufficient funds, an unknown account, a malformed body.
    CHECK(post_payout(svc.port, "po-3", payout_body(alice, 1'000'000, "bank-1"))->status == 422);
    CHECK(post_payout(svc.port, "po-4", payout_body(unique("nobody-"), 1, "bank-1"))->status == 404);
    auto malformed = post_payout(svc.port, "po-5", R"({"account":"a","amount":-1,"destination":"d"})");
    CHECK(malformed->status == 422);
    CHECK(post_payout(svc.port, "po-5", R"({"account":"a","amount":-1,"destination":"d"})")->body == malformed->body);
    // An operation in steps needs its key.
    CHECK(svc.post("/payouts", body, {})->status == 400);
    CHECK(provider.count("SELECT COUNT(*) FROM applied") == 1);
    CHECK(svc.count("SELECT COUNT(*) FROM payout_entries e JOIN payouts p ON p.id = e.payout WHERE p.account = '" +
                    alice + "' AND e.step = 'hold'") == 2);
}

TEST_CASE("payouts: a provider that never answers: 202 with the state and Retry-After, then the completer cancels") {
    payout_provider provider;
    payments_service svc({.extra = {"--provider", provider.url(), "--lease", "10", "--completer-backoff", "50"}});
    const std::string bob = unique("bob-");
    svc.open(bob, 5'000);
    const std::string body = payout_body(bob, 1'200, "unreachable-1");
    auto first = post_payout(svc.port, "po-u", body);
    REQUIRE(first);
    CHECK(first->status == 202);
    CHECK(first->get_header_value("Retry-After") == "1");
    const json state = json::parse(first->body);
    CHECK(state["state"] == "running");
    CHECK(state["recovery_point"] == 1);
    REQUIRE(state["steps"].size() == 2);
    CHECK(state["steps"][0]["name"] == "hold");
    CHECK(state["steps"][0]["stored"] == true);
    CHECK(state["steps"][1]["name"] == "send");
    CHECK(state["steps"][1]["stored"] == false);
    CHECK(svc.balance(bob) == 3'800);  // held
    // The completer tries three times, then cancels at the provider and releases the hold.
    auto last = until_final(svc.port, "po-u", body);
    REQUIRE(last);
    CHECK(last->status == 502);
    CHECK(last->body.find("Payments.PayoutFailed") != std::string::npos);
    CHECK(svc.balance(bob) == 5'000);
    CHECK(provider.count("SELECT COUNT(*) FROM cancelled") == 1);
    CHECK(provider.count("SELECT COUNT(*) FROM applied") == 0);
    CHECK(svc.count("SELECT COUNT(*) FROM payouts WHERE state = 'cancelled' AND account = '" + bob + "'") == 1);
    // The completer's figures, as it reports them (every second).
    bool reported = false;
    for (int i = 0; i < 100 && !reported; ++i) {
        auto metrics = svc.client().Get("/metrics");
        reported = metrics && metrics->body.find("idem_completer_compensated_total 1") != std::string::npos;
        if (!reported) std::this_thread::sleep_for(50ms);
    }
    CHECK(reported);
}

TEST_CASE("payouts: compensated after the provider paid and before its answer was stored, the payout stands") {
    payout_provider provider;
    const idem::test::temp_dir dir{"payouts-paid"};
#if defined(IDEM_PAYMENTS_POSTGRESQL)
    const std::string db = idem::test::shared_postgres();
#elif defined(IDEM_PAYMENTS_MARIADB)
    const std::string db = idem::test::shared_mariadb();
#else
    const std::string db = "sqlite:" + (dir.path() / "payments.db").string();
#endif
    const std::vector<std::string> flags = {"--provider", provider.url(), "--completer-backoff", "50"};
    const std::string carol = unique("carol-");
    const std::string body = payout_body(carol, 700, "bank-paid");
    {
        // The provider pays; the service dies before it stores the answer.
        payments_service doomed({.db = db, .extra = flags, .crash_at = "payout.sent"});
        doomed.open(carol, 5'000);
        CHECK_FALSE(post_payout(doomed.port, "po-paid", body));
        REQUIRE(doomed.process->wait_for_exit(60s));
        (void)doomed.process->reap();
    }
    REQUIRE(provider.count("SELECT COUNT(*) FROM applied") == 1);
    // An operator marks it to compensate, as idem complete --compensate does: its
    // lease ends, its fence moves on, and its compensation begins after its steps.
    std::string input_hex;
    for (const unsigned char c : body) input_hex += fmt_hex(c);
    {
        idem::database payments = idem::database::open(db);
        payments.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "UPDATE idem_operations SET fence = fence + 1, expires_at = 0, compensate_from = (SELECT "
                         "COALESCE(MAX(s.step_index) + 1, 0) FROM idem_steps s WHERE s.record_id = "
                         "idem_operations.record_id) WHERE state = 0 AND input = :input",
                soci::use(input_hex);
        });
    }
    payments_service healthy({.db = db, .extra = flags});
    auto last = until_final(healthy.port, "po-paid", body);
    REQUIRE(last);
    // The provider said the payout was made: it is settled as paid, not cancelled.
    CHECK(last->status == 201);
    CHECK(json::parse(last->body)["status"] == "paid");
    CHECK(healthy.balance(carol) == 5'000 - 700);
    CHECK(healthy.count("SELECT COUNT(*) FROM payouts WHERE state = 'paid' AND account = '" + carol + "'") == 1);
    CHECK(provider.count("SELECT COUNT(*) FROM applied") == 1);
    CHECK(provider.count("SELECT COUNT(*) FROM cancelled") == 0);
    // By its compensation: a cancel call the provider answered "paid", and a settle after it.
    CHECK(healthy.count("SELECT COUNT(*) FROM idem_operations o JOIN idem_steps s ON s.record_id = o.record_id "
                        "WHERE o.input = '" +
                        input_hex +
                        "' AND o.state = 1 AND s.step_index >= o.compensate_from AND s.name IN ('cancel', "
                        "'settle')") == 2);
}

TEST_CASE("payouts: SIGKILL between every pair of steps and inside the call, 300 payouts, the completer running") {
    payout_provider provider;
    // A lease longer than the provider client's longest call (2 s to connect, 5 s to read).
    const std::vector<std::string> flags = {"--provider", provider.url(), "--lease", "10", "--completer-backoff", "50"};
    std::vector<std::string> accounts;
    // The database outlives every instance of the service.
    const idem::test::temp_dir dir{"payouts"};
#if defined(IDEM_PAYMENTS_POSTGRESQL)
    const std::string db = idem::test::shared_postgres();
#elif defined(IDEM_PAYMENTS_MARIADB)
    const std::string db = idem::test::shared_mariadb();
#else
    const std::string db = "sqlite:" + (dir.path() / "payments.db").string();
#endif
    {
        payments_service setup({.db = db, .extra = flags});
        for (int a = 0; a < 6; ++a) {
            accounts.push_back(unique("payer-"));
            setup.open(accounts.back(), 1'000'000);
        }
    }
    struct payout {
        std::string key, account, destination, body;
        long long amount = 0;
        std::atomic<int> status{0};  // the final answer's
        json answer;
    };
    constexpr int count = 300;
    std::vector<payout> payouts(count);
    for (int i = 0; i < count; ++i) {
        payout& p = payouts[i];
        p.key = unique("po-");
        p.account = accounts[i % accounts.size()];
        p.amount = 100 + i;
        p.destination = (i % 10 == 3 ? "unreachable-" : i % 10 == 7 ? "declined-" : "bank-") + std::to_string(i);
        p.body = payout_body(p.account, p.amount, p.destination);
    }

    // Clients send every payout until it has a final answer: through 202, 503 and the
    // service's deaths (no answer), whatever port the service listens on now.
    // They stop when every one of theirs has its answer, or when told to.
    std::atomic<int> port{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    constexpr int client_threads = 6;
    for (int t = 0; t < client_threads; ++t)
        clients.emplace_back([&, t] {
            for (bool pending = true; pending && !stop;) {
                pending = false;
                for (int i = t; i < count; i += client_threads) {
                    payout& p = payouts[i];
                    if (p.status != 0) continue;
                    auto r = post_payout(port, p.key, p.body);
                    if (r && r->status != 202 && r->status != 503) {
                        p.answer = json::parse(r->body);
                        p.status = r->status;
                    } else {
                        pending = true;
                    }
                }
                std::this_thread::sleep_for(20ms);
            }
        });

    // The service, killed at every crash point in turn, three times each, the n-th
    // time it gets there; then a healthy one, until every payout has its answer.
    const std::vector<std::string> points = {"payout.held",     "payout.sending", "payout.sent",
                                             "payout.answered", "payout.settled", "payout.cancelled"};
    std::map<std::string, int> killed_at;
    // Each instance lives until it dies at its point or nothing is left to
    // answer (then no payout can reach a point any more, and the rounds end).
    const auto all_answered = [&] {
        return std::none_of(payouts.begin(), payouts.end(), [](const payout& p) { return p.status == 0; });
    };
    for (int round = 0; round < 18 && !all_answered(); ++round) {
        const std::string& point = points[round % points.size()];
        payments_service doomed({.db = db, .extra = flags, .crash_at = point, .crash_after = 1 + round % 5});
        port = doomed.port;
        bool exited = false;
        for (int waited = 0; waited < 600 && !(exited = doomed.process->wait_for_exit(500ms)) && !all_answered();)
            ++waited;
        if (exited) {
            const int status = doomed.process->reap();
            if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++killed_at[point];
        }
    }
    const auto answered = std::count_if(payouts.begin(), payouts.end(), [](const payout& p) { return p.status != 0; });
    {
        payments_service healthy({.db = db, .extra = flags});
        port = healthy.port;
        // Every payout is answered long before this bound; it only keeps a broken run from hanging.
        const auto bound = std::chrono::steady_clock::now() + 10min;
        while (std::chrono::steady_clock::now() < bound &&
               std::any_of(payouts.begin(), payouts.end(), [](const payout& p) { return p.status == 0; }))
            std::this_thread::sleep_for(100ms);
        stop = true;
        for (std::thread& c : clients) c.join();
        // Nothing is left unfinished.
        CHECK(healthy.count("SELECT COUNT(*) FROM idem_operations WHERE state = 0") == 0);
    }
    for (const std::string& point : points) {
        CAPTURE(point);
        CHECK(killed_at[point] > 0);
    }

    // Every payout ended as its destination says: paid, declined, or (never
    // answered) cancelled. A completer killed is no failed run, and money that
    // moved is never cancelled.
    std::map<std::string, long long> paid_from;
    long long paid_total = 0;
    int paid = 0, declined = 0, cancelled = 0;
    for (const payout& p : payouts) {
        CAPTURE(p.destination);
        CAPTURE(p.answer.dump());
        REQUIRE((p.status == 201 || p.status == 422 || p.status == 502));
        if (p.destination.starts_with("unreachable")) CHECK(p.status == 502);
        if (p.destination.starts_with("declined")) CHECK(p.status == 422);
        if (p.destination.starts_with("bank")) CHECK(p.status == 201);
        if (p.status == 201) {
            ++paid;
            paid_from[p.account] += p.amount;
            paid_total += p.amount;
        }
        declined += p.status == 422;
        cancelled += p.status == 502;
    }
    std::string kills;
    for (const auto& [point, n] : killed_at) kills += " " + point + " x" + std::to_string(n);
    payments_service check({.db = db, .extra = flags});
    // The completer finished (or undid) payouts whose request died.
    const long long by_completer =
        check.count("SELECT COUNT(*) FROM idem_operations WHERE namespace = 'payments.payout' AND completions > 0");
    CHECK(by_completer > 0);
    MESSAGE(paid << " paid, " << declined << " declined, " << cancelled << " cancelled; " << answered
                 << " answered while the service was being killed; " << by_completer
                 << " taken over by a completer; killed at" << kills);
    // Balances exact: what each account paid out, and nothing else, left it.
    for (const std::string& a : accounts) CHECK(check.balance(a) == 1'000'000 - paid_from[a]);
    // No step ran twice: one hold per payout, and either its settle or its release, once.
    std::string mine = "(";
    for (const std::string& a : accounts) mine += (mine.size() > 1 ? ", '" : "'") + a + "'";
    mine += ")";
    const std::string entries = "payout_entries e JOIN payouts p ON p.id = e.payout WHERE p.account IN " + mine;
    CHECK(check.count("SELECT COUNT(*) FROM payouts WHERE account IN " + mine) == count);
    CHECK(check.count("SELECT COUNT(*) FROM (SELECT e.payout FROM " + entries +
                      " GROUP BY e.payout, e.step HAVING COUNT(*) > 1) AS twice") == 0);
    CHECK(check.count("SELECT COUNT(*) FROM " + entries + " AND e.step = 'hold'") == count);
    CHECK(check.count("SELECT COUNT(*) FROM " + entries + " AND e.step IN ('settle', 'release')") == count);
    CHECK(check.count("SELECT COUNT(*) FROM payouts WHERE state = 'paid' AND account IN " + mine) == paid);
    // The provider applied each key at most once, and exactly the paid payouts.
    CHECK(provider.count("SELECT COUNT(*) FROM (SELECT idempotency_key FROM applied GROUP BY idempotency_key "
                         "HAVING COUNT(*) > 1)") == 0);
    CHECK(provider.count("SELECT COUNT(*) FROM applied") == paid);
    CHECK(provider.count("SELECT COALESCE(SUM(amount), 0) FROM applied") == paid_total);
    for (const payout& p : payouts)
        if (p.status == 201)
            CHECK(provider.count("SELECT COUNT(*) FROM applied WHERE payout = '" + p.answer["id"].get<std::string>() +
                                 "'") == 1);
}
