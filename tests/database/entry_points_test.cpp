// The entry points' database forms on real SQLite files and a throwaway
// PostgreSQL: the HTTP layer, the webhook receiver and the inbox each run their
// handler in a unit of work of an idem::database that also holds the record,
// so one request is one record and one transaction.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bank_places.hpp"
#include "idem/http/layer.hpp"
#include "idem/http/problem.hpp"
#include "idem/inbox.hpp"
#include "idem/operation.hpp"
#include "idem/sqlite_store.hpp"
#ifdef IDEM_TEST_MARIADB
#include "idem/mariadb_store.hpp"
#endif
#include "idem/webhook.hpp"
#include "mapped_bank.hpp"
#include "recording_sink.hpp"
#ifdef IDEM_TEST_POSTGRESQL
#include "slow_commit.hpp"
#include "tcp_proxy.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using namespace idem::test;
using idem::execution_status;
namespace http = idem::http;

long long records(idem::database& db) {
    return count_rows(db, "SELECT COUNT(*) FROM idem_records");
}
long long transfers(idem::database& db) {
    return count_rows(db, "SELECT COUNT(*) FROM transfers");
}

// A POST /transfers request carrying `key` from caller `client`.
struct keyed_request {
    std::string key_header;
    std::string body = R"({"amount":10})";
    idem::claims caller = {{"client_id", "c1"}};
    [[nodiscard]] http::request view() const {
        http::request r{
            .method = "POST", .target = "/transfers", .body = body, .caller = caller, .route = "/transfers"};
        if (!key_header.empty()) r.key_headers = {key_header};
        return r;
    }
};

// The endpoint of these tests: moves 10 from alice to bob, writes a transfer row, answers 201.
struct transfer_endpoint {
    std::atomic<int> runs{0};
    std::chrono::milliseconds delay{0};
    int status = 201;

    http::response operator()(idem::unit_of_work& uow) {
        ++runs;
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        move(uow, 10);
        const std::string id = "t" + std::to_string(runs.load()) + "-" + std::to_string(std::rand());
        uow.sql() << "INSERT INTO transfers (id, from_account, to_account, amount) VALUES (:id, 'alice', 'bob', 10)",
            soci::use(id);
        http::response r{.status = status, .body = R"({"id":")" + id + "\"}"};
        r.set_header("Content-Type", "application/json");
        return r;
    }
};

http::layer_options client_scoped(http::layer_options o = {}) {
    o.resolver = idem::scopes::client();
    return o;
}

}  // namespace

TEST_CASE("HTTP in a unit of work: one record per request, committed with the writes; a retry replays it") {
    on_every_bank([&](idem::database& db) {
        http::idempotency_layer layer(db.executor(), client_scoped());
        transfer_endpoint endpoint;
        const keyed_request req{.key_header = "\"k-1\""};
        const long long before = records(db);
        const http::response first = layer.handle(db, req.view(), std::ref(endpoint));
        CHECK(first.status == 201);
        CHECK(first.header("Idempotent-Replayed").empty());
        const http::response again = layer.handle(db, req.view(), std::ref(endpoint));
        CHECK(again.status == 201);
        CHECK(again.header("Idempotent-Replayed") == "true");
        CHECK(again.body == first.body);
        CHECK(again.header("Content-Type") == "application/json");
        CHECK(endpoint.runs == 1);
        CHECK(records(db) == before + 1);  // one record, no lease-mode twin
        CHECK(transfers(db) == 1);
        CHECK(balance(db, "bob") == 10);
        // Another body under the same key: 422, nothing run.
        keyed_request other = req;
        other.body = R"({"amount":11})";
        CHECK(layer.handle(db, other.view(), std::ref(endpoint)).status == 422);
        CHECK(endpoint.runs == 1);
    });
}

TEST_CASE(
    "HTTP in a unit of work: a redact hook keeps a masked copy: the first caller gets the card number, every replay "
    "the masked body, and the record table holds no card number") {
    const std::string card = "4111111111111111";
    on_every_bank([&](idem::database& db) {
        http::layer_options options = client_scoped();
        options.redact = [&](http::response& stored) {
            for (std::size_t at; (at = stored.body.find(card)) != std::string::npos;)
                stored.body.replace(at, card.size(), "************1111");
        };
        http::idempotency_layer layer(db.executor(), options);
        int runs = 0;
        auto endpoint = [&](idem::unit_of_work& uow) {
            ++runs;
            move(uow, 10);
            http::response r{.status = 201, .body = R"({"card":")" + card + R"(","run":)" + std::to_string(runs) + "}"};
            r.set_header("Content-Type", "application/json");
            return r;
        };
        const keyed_request req{.key_header = "card-1"};
        const http::response first = layer.handle(db, req.view(), endpoint);
        CHECK(first.status == 201);
        CHECK(first.body == R"({"card":")" + card + R"(","run":1})");
        const http::response again = layer.handle(db, req.view(), endpoint);
        CHECK(again.status == 201);
        CHECK(again.header("Idempotent-Replayed") == "true");
        CHECK(again.body == R"({"card":"************1111","run":1})");
        CHECK(again.header("Content-Type") == "application/json");
        CHECK(runs == 1);
        CHECK(balance(db, "bob") == 10);
        CHECK(records(db) == 1);
        const std::string holding =
            db.engine() == "postgresql"
                ? "SELECT COUNT(*) FROM idem_records WHERE position(convert_to('" + card + "', 'UTF8') in payload) > 0"
            : db.engine() == "mariadb"
                ? "SELECT COUNT(*) FROM idem_records WHERE instr(payload, '" + card + "') > 0"
                : "SELECT COUNT(*) FROM idem_records WHERE instr(payload, CAST('" + card + "' AS BLOB)) > 0";
        CHECK(count_rows(db, holding) == 0);
    });
}

TEST_CASE("HTTP in a unit of work: a handler on mapped objects moves the money once per key, no update lost") {
    on_every_bank({.pool_size = 8, .attempts = 20}, [&](idem::database& db) {
        http::idempotency_layer layer(db.executor(), client_scoped());
        std::atomic<int> next_id{0};
        auto endpoint = [&](idem::unit_of_work& uow) {
            bank::account& alice = uow.get<bank::account>("alice");  // FOR UPDATE on PostgreSQL: no version column
            bank::account& bob = uow.get<bank::account>("bob");
            const long long read = alice.balance;
            std::this_thread::sleep_for(1ms);  // room for a concurrent writer, were the row not held
            alice.balance = read - 10;
            bob.balance += 10;
            const bank::transfer& t = uow.add(bank::transfer{"t-" + std::to_string(++next_id), "alice", "bob", 10});
            http::response r{.status = 201, .body = R"({"id":")" + t.id + "\"}"};
            r.set_header("Content-Type", "application/json");
            return r;
        };
        constexpr int threads = 6, each = 8;
        std::atomic<int> created{0}, replayed{0};
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                for (int n = 0; n < each; ++n) {
                    const keyed_request req{.key_header = "k-" + std::to_string(t) + "-" + std::to_string(n)};
                    const http::response first = layer.handle(db, req.view(), endpoint);
                    const http::response again = layer.handle(db, req.view(), endpoint);  // the client's retry
                    if (first.status == 201) ++created;
                    if (again.status == 201 && again.header("Idempotent-Replayed") == "true" &&
                        again.body == first.body)
                        ++replayed;
                }
            });
        for (auto& t : pool) t.join();
        CHECK(created == threads * each);
        CHECK(replayed == threads * each);
        CHECK(transfers(db) == threads * each);
        CHECK(balance(db, "bob") == 10 * threads * each);
        CHECK(balance(db, "alice") == 1000000 - 10 * threads * each);
    });
}

TEST_CASE("HTTP in a unit of work: a refusal rolls the writes back and is recorded; 409 and 5xx are not") {
    on_every_bank([&](idem::database& db) {
        http::idempotency_layer layer(db.executor(), client_scoped());
        transfer_endpoint endpoint;
        endpoint.status = 422;  // wrote, then refused
        const keyed_request refused{.key_header = "refused"};
        const long long before = records(db);
        CHECK(layer.handle(db, refused.view(), std::ref(endpoint)).status == 422);
        CHECK(balance(db, "bob") == 0);  // what the endpoint wrote is gone
        CHECK(transfers(db) == 0);
        CHECK(records(db) == before + 1);  // the refusal is the key's answer
        const http::response replay = layer.handle(db, refused.view(), std::ref(endpoint));
        CHECK(replay.status == 422);
        CHECK(replay.header("Idempotent-Replayed") == "true");
        CHECK(endpoint.runs == 1);

        for (int status : {409, 500, 503}) {
            CAPTURE(status);
            endpoint.status = status;
            const keyed_request r{.key_header = "not-final-" + std::to_string(status)};
            const int runs = endpoint.runs;
            CHECK(layer.handle(db, r.view(), std::ref(endpoint)).status == status);
            CHECK(layer.handle(db, r.view(), std::ref(endpoint)).status == status);
            CHECK(endpoint.runs == runs + 2);  // not recorded: each request runs
        }
        CHECK(balance(db, "bob") == 0);
        CHECK(records(db) == before + 1);
    });
}

TEST_CASE("HTTP in a unit of work: an endpoint that throws rolls back, leaves the key free and propagates") {
    on_every_bank([&](idem::database& db) {
        http::idempotency_layer layer(db.executor(), client_scoped());
        const keyed_request req{.key_header = "throws"};
        bool fail = true;
        transfer_endpoint endpoint;
        auto flaky = [&](idem::unit_of_work& uow) {
            http::response r = endpoint(uow);
            if (fail) throw std::runtime_error("the endpoint failed after its writes");
            return r;
        };
        CHECK_THROWS_AS(layer.handle(db, req.view(), flaky), std::runtime_error);
        CHECK(balance(db, "bob") == 0);
        fail = false;
        CHECK(layer.handle(db, req.view(), flaky).status == 201);  // runs at once: no lease to wait out
        CHECK(balance(db, "bob") == 10);
    });
}

TEST_CASE("HTTP in a unit of work: concurrent duplicates wait for the first and get its replay, never 409") {
    for (const bool reserve_first : {false, true}) {
        for (const auto& where : places()) {
            CAPTURE(where->url());
            CAPTURE(reserve_first);
            idem::database db = open_bank(*where, {.pool_size = 8});
            http::layer_options o = client_scoped();
            o.reserve_first = reserve_first;
            http::idempotency_layer layer(db.executor(), o);
            transfer_endpoint endpoint;
            endpoint.delay = 100ms;
            const keyed_request req{.key_header = "dup"};
            constexpr int threads = 6;
            std::barrier start(threads);
            std::vector<std::future<http::response>> answers;
            for (int i = 0; i < threads; ++i)
                answers.push_back(std::async(std::launch::async, [&] {
                    start.arrive_and_wait();
                    return layer.handle(db, req.view(), std::ref(endpoint));
                }));
            int executed = 0, replayed = 0;
            std::string body;
            for (auto& a : answers) {
                const http::response r = a.get();
                REQUIRE(r.status == 201);
                (r.header("Idempotent-Replayed") == "true" ? replayed : executed)++;
                if (body.empty()) body = r.body;
                CHECK(r.body == body);
            }
            CHECK(executed == 1);
            CHECK(replayed == threads - 1);
            CHECK(balance(db, "bob") == 10);
            CHECK(transfers(db) == 1);
            if (reserve_first) CHECK(endpoint.runs == 1);  // a duplicate never starts the endpoint
        }
    }
}

TEST_CASE("HTTP in a unit of work: a response it cannot record rolls back and answers 500") {
    on_every_bank([&](idem::database& db) {
        http::layer_options o = client_scoped();
        o.max_stored_body = 4;
        http::idempotency_layer layer(db.executor(), o);
        transfer_endpoint endpoint;
        const keyed_request req{.key_header = "too-big"};
        const http::response r = layer.handle(db, req.view(), std::ref(endpoint));
        CHECK(r.status == 500);
        CHECK(r.body.find("Idempotency.ResponseNotStored") != std::string::npos);
        CHECK(balance(db, "bob") == 0);
        CHECK(transfers(db) == 0);
    });
}

TEST_CASE("HTTP in a unit of work: Observe and Off let every request reach the endpoint, as with no layer") {
    for (const auto mode : {idem::mode::observe, idem::mode::off}) {
        for (const auto& where : places()) {
            CAPTURE(where->url());
            CAPTURE(idem::to_string(mode));
            auto sink = std::make_shared<recording_sink>();
            idem::database db =
                open_bank(*where, {.executor = {.mode = mode, .http = {.require_key = true}}, .telemetry = sink});
            http::idempotency_layer layer(db.executor(), client_scoped());
            transfer_endpoint endpoint;
            const std::vector<keyed_request> requests = {
                {.key_header = ""},                   // no key where one is required
                {.key_header = "\"two\", \"keys\""},  // an invalid key
                {.key_header = "who", .caller = {}},  // no identified caller
                {.key_header = "again"},
                {.key_header = "again"},  // a repeated key
            };
            for (const auto& r : requests) {
                const http::response answer = layer.handle(db, r.view(), std::ref(endpoint));
                CHECK(answer.status == 201);
                CHECK(answer.header("Idempotent-Replayed").empty());
            }
            CHECK(endpoint.runs == static_cast<int>(requests.size()));
            CHECK(balance(db, "bob") == 10 * static_cast<long long>(requests.size()));
            if (mode == idem::mode::observe) {
                CHECK(sink->count(idem::outcome::key_missing, idem::mode::observe) == 1);
                CHECK(sink->count(idem::outcome::key_invalid, idem::mode::observe) == 1);
                CHECK(sink->count(idem::outcome::unscoped, idem::mode::observe) == 1);
                CHECK(sink->count(idem::outcome::replay, idem::mode::observe) ==
                      1);  // what Enforce would have answered
            } else {
                CHECK(records(db) == 0);
            }
        }
    }
}

TEST_CASE("webhook receiver in a unit of work: applied once, a transient failure rolls back, a permanent one stays") {
    on_every_bank([&](idem::database& db) {
        idem::webhook::receiver provider(
            db.executor(), {.provider = "provider",
                            .scheme = idem::webhook::timestamped_signature{},
                            .secrets = {"whsec-new", "whsec-old"},
                            .identify = idem::webhook::id_from_json("id", idem::scope::custom("account", "acme"))});
        const std::vector<std::string> old_secret = {"whsec-old"};
        auto delivery_of = [&](const std::string& body, std::string& header) {
            header = idem::webhook::sign_timestamped(old_secret, body, std::chrono::system_clock::now());
            return idem::webhook::delivery{.body = body, .headers = {{"Stripe-Signature", header}}};
        };
        std::atomic<int> runs{0};
        idem::webhook::handler_result result = idem::webhook::handler_result::transient_failure("account not open yet");
        auto handler = [&](idem::unit_of_work& uow, const idem::webhook::event&) {
            ++runs;
            move(uow, 10);
            return result;
        };
        std::string header;
        const std::string event = R"({"id":"evt_1"})";
        auto first = provider.handle(db, delivery_of(event, header), handler);
        CHECK(first.status == 503);
        CHECK(first.retry_after == 1);
        CHECK(balance(db, "bob") == 0);  // rolled back with the key's claim
        result = idem::webhook::handler_result::applied();
        auto second = provider.handle(db, delivery_of(event, header), handler);
        CHECK(second.status == 200);
        CHECK(second.verdict == idem::webhook::verdict::applied);
        auto third = provider.handle(db, delivery_of(event, header), handler);
        CHECK(third.verdict == idem::webhook::verdict::duplicate);
        CHECK(runs == 2);
        CHECK(balance(db, "bob") == 10);

        result = idem::webhook::handler_result::permanent_failure("over the limit");
        const std::string other = R"({"id":"evt_2"})";
        CHECK(provider.handle(db, delivery_of(other, header), handler).verdict ==
              idem::webhook::verdict::permanent_failure);
        CHECK(provider.handle(db, delivery_of(other, header), handler).verdict == idem::webhook::verdict::duplicate);
        CHECK(runs == 3);
        // A handler that throws rolls back; the redelivery runs it again.
        const std::string thrown = R"({"id":"evt_4"})";
        auto throwing = [&](idem::unit_of_work& uow, const idem::webhook::event&) -> idem::webhook::handler_result {
            ++runs;
            move(uow, 10);
            throw std::runtime_error("the handler failed");
        };
        CHECK_THROWS_AS((void)provider.handle(db, delivery_of(thrown, header), throwing), std::runtime_error);
        result = idem::webhook::handler_result::applied();
        CHECK(provider.handle(db, delivery_of(thrown, header), handler).verdict == idem::webhook::verdict::applied);
        CHECK(runs == 5);
        CHECK(balance(db, "bob") == 30);  // a permanent failure commits what its handler wrote
        // A forged delivery claims nothing.
        const idem::webhook::delivery forged{.body = R"({"id":"evt_3"})",
                                             .headers = {{"Stripe-Signature", "t=1,v1=00"}}};
        CHECK(provider.handle(db, forged, handler).status == 401);
        CHECK(runs == 5);
    });
}

TEST_CASE("inbox in a unit of work: each message once, a throw rolls the handler and the record back") {
    on_every_bank([&](idem::database& db) {
        idem::inbox box(db.executor());
        std::atomic<int> runs{0};
        bool fail = true;
        auto handler = [&](idem::unit_of_work& uow) {
            ++runs;
            move(uow, 10);
            if (fail) throw std::runtime_error("the consumer failed");
        };
        const auto owner = idem::scope::tenant("acme");
        CHECK_THROWS_AS(box.process(db, "billing", "m-1", owner, handler), std::runtime_error);
        CHECK(balance(db, "bob") == 0);
        fail = false;
        CHECK(box.process(db, "billing", "m-1", owner, handler).status() == execution_status::executed);
        CHECK(box.process(db, "billing", "m-1", owner, handler).status() == execution_status::replayed);
        CHECK(box.process(db, "shipping", "m-1", owner, handler).status() == execution_status::executed);
        CHECK(runs == 3);
        CHECK(balance(db, "bob") == 20);
        // Several messages in one unit of work of the consumer's own.
        db.transact([&](idem::unit_of_work& uow) {
            CHECK(box.process(uow, "batch", "m-2", owner, [&] { move(uow, 1); }) == execution_status::executed);
            CHECK(box.process(uow, "batch", "m-2", owner, [&] { move(uow, 1); }) == execution_status::replayed);
        });
        CHECK(balance(db, "bob") == 21);
    });
}

TEST_CASE("once: a result classified release rolls the unit of work back and frees the key") {
    on_every_bank([&](idem::database& db) {
        const auto codec = idem::make_codec<int>(
            [](int v) { return std::to_string(v); }, [](std::string_view s) { return std::stoi(std::string(s)); },
            [](int v) { return v < 0 ? idem::classification::release : idem::classification::store; });
        int answer = -1;
        auto work = [&](idem::unit_of_work& uow) {
            move(uow, 10);
            return answer;
        };
        CHECK(db.once(key_of("released"), "fp", work, codec).value() == -1);
        CHECK(balance(db, "bob") == 0);
        answer = 7;
        CHECK(db.once(key_of("released"), "fp", work, codec).status() == execution_status::executed);
        CHECK(db.once(key_of("released"), "fp", work, codec).status() == execution_status::replayed);
        CHECK(balance(db, "bob") == 10);
    });
}

TEST_CASE("a borrowed session runs the same units of work on the application's own soci::session") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        soci::session mine;
        if (where->postgresql()) idem::open_postgresql_session(mine, where->url());
#ifdef IDEM_TEST_MARIADB
        else if (where->mariadb())
            idem::open_mariadb_session(mine, where->url());
#endif
        else
            idem::open_sqlite_session(mine, where->url().substr(std::string("sqlite:").size()));
        idem::borrowed_session on_mine = db.borrow(mine);
        std::atomic<int> runs{0};
        auto work = [&](idem::unit_of_work& uow) {
            ++runs;
            CHECK(&uow.sql() == &mine);
            move(uow, 10);
            return std::string("moved");
        };
        CHECK(on_mine.once(key_of("borrowed"), "fp", work).status() == execution_status::executed);
        // The pooled form sees the same record: the key is the database's, not the session's.
        CHECK(db.once(key_of("borrowed"), "fp", work).status() == execution_status::replayed);
        CHECK(on_mine.once(key_of("borrowed"), "fp", work).value() == "moved");
        CHECK(runs == 1);
        // A once() inside the application's transaction joins it: a rollback takes the record too.
        CHECK_THROWS_AS(on_mine.transact([&](idem::unit_of_work&) {
            (void)on_mine.once(key_of("joined"), "fp", work);
            throw std::runtime_error("the application's transaction fails");
        }),
                        std::runtime_error);
        CHECK(on_mine.once(key_of("joined"), "fp", work).status() == execution_status::executed);
        CHECK(runs == 3);
        CHECK(balance(db, "bob") == 20);
    }
}

namespace {

// An endpoint in steps: moves the amount of its body from alice to bob in a step,
// asks a provider (a call that fails while `provider_down`), answers 201.
struct transfer_operation {
    bool provider_down = false;
    int moves = 0;
    std::unique_ptr<idem::operation<http::response>> op;

    explicit transfer_operation(const http::idempotency_layer& layer)
        : op(std::make_unique<idem::operation<http::response>>(
              "bank.http_transfer",
              [this](idem::steps& s) {
                  s.step("move", [&](idem::unit_of_work& uow) { return (++moves, move(uow, 10), 0); });
                  const std::string charge = s.call("notify", [&](const std::string&) {
                      if (provider_down) throw std::runtime_error("the provider did not answer");
                      return std::string("ok");
                  });
                  return http::response{.status = 201, .body = R"({"moved":10,"provider":")" + charge + "\"}"};
              },
              idem::operation_options<http::response>{.codec = layer.operation_codec()})) {}
};

}  // namespace

TEST_CASE("HTTP in steps: the final response, 202 with the state while it is unfinished, then the replay") {
    on_every_bank([](idem::database& db) {
        http::idempotency_layer layer(db.executor(), client_scoped());
        transfer_operation transfer(layer);
        // In every mode an operation in steps needs its key.
        layer.source().replace({.mode = idem::mode::observe});
        CHECK(layer.handle(db, keyed_request{}.view(), *transfer.op).status == 400);
        layer.source().replace({});
        const keyed_request req{.key_header = "s1"};
        transfer.provider_down = true;
        const http::response unfinished = layer.handle(db, req.view(), *transfer.op);
        CHECK(unfinished.status == 202);
        CHECK(unfinished.header("Retry-After") == "1");
        CHECK(unfinished.header("Content-Type") == "application/json");
        CHECK(unfinished.body ==
              R"({"completer_runs":0,"recovery_point":1,"state":"running","steps":[{"attempts":1,"compensation":false,)"
              R"("kind":"step","name":"move","stored":true},{"attempts":1,"compensation":false,"kind":"call",)"
              R"("name":"notify","stored":false}]})");
        transfer.provider_down = false;
        const http::response done = layer.handle(db, req.view(), *transfer.op);
        CHECK(done.status == 201);
        CHECK(done.body == R"({"moved":10,"provider":"ok"})");
        const http::response again = layer.handle(db, req.view(), *transfer.op);
        CHECK(again.status == 201);
        CHECK(again.body == done.body);
        CHECK(again.header("Idempotent-Replayed") == "true");
        keyed_request other = req;
        other.body = R"({"amount":11})";
        CHECK(layer.handle(db, other.view(), *transfer.op).status == 422);
        CHECK(transfer.moves == 1);
        CHECK(balance(db, "bob") == 10);
    });
}

TEST_CASE("HTTP in steps: each answer is counted (idem_decisions_total) as the other entry points count theirs") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        auto sink = std::make_shared<recording_sink>();
        idem::database db = open_bank(*where, {.telemetry = sink});
        http::idempotency_layer layer(db.executor(), client_scoped());
        transfer_operation transfer(layer);
        const keyed_request req{.key_header = "counted"};
        transfer.provider_down = true;
        CHECK(layer.handle(db, req.view(), *transfer.op).status == 202);  // it ran, and stopped
        transfer.provider_down = false;
        CHECK(layer.handle(db, req.view(), *transfer.op).status == 201);
        CHECK(layer.handle(db, req.view(), *transfer.op).status == 201);  // the replay
        keyed_request other = req;
        other.body = R"({"amount":11})";
        CHECK(layer.handle(db, other.view(), *transfer.op).status == 422);
        CHECK(layer.handle(db, keyed_request{.key_header = ""}.view(), *transfer.op).status == 400);
        CHECK(layer.handle(db, keyed_request{.key_header = "\"two\", \"keys\""}.view(), *transfer.op).status == 400);
        CHECK(layer.handle(db, keyed_request{.key_header = "who", .caller = {}}.view(), *transfer.op).status == 400);
        using idem::mode;
        using idem::outcome;
        CHECK(sink->count(outcome::executed, mode::enforce) == 2);
        CHECK(sink->count(outcome::replay, mode::enforce) == 1);
        CHECK(sink->count(outcome::key_reused, mode::enforce) == 1);
        CHECK(sink->count(outcome::key_missing, mode::enforce) == 1);
        CHECK(sink->count(outcome::key_invalid, mode::enforce) == 1);
        CHECK(sink->count(outcome::unscoped, mode::enforce) == 1);
        CHECK(sink->logged("idem.http.unscoped"));
    }
}

#ifdef IDEM_TEST_POSTGRESQL

TEST_CASE("HTTP in steps (PostgreSQL): a database that is down answers 503 before the operation begins") {
    idem::test::postgres_server server;
    idem::database db = open_bank(idem::test::connection_place(server.conninfo()), {.attempts = 1});
    http::idempotency_layer layer(db.executor(), client_scoped());
    transfer_operation transfer(layer);
    const keyed_request req{.key_header = "down-steps"};
    server.stop();
    const http::response r = layer.handle(db, req.view(), *transfer.op);
    CHECK(r.status == 503);
    CHECK_FALSE(r.header("Retry-After").empty());
    server.start();
    const http::response retry = layer.handle(db, req.view(), *transfer.op);
    CHECK(retry.status == 201);
    CHECK(transfer.moves == 1);
    CHECK(balance(db, "bob") == 10);
}

TEST_CASE("HTTP in a unit of work (PostgreSQL): an in-doubt COMMIT answers 503; the retry replays or runs") {
    idem::test::postgres_server server;
    idem::test::tcp_proxy proxy(server.port());
    idem::database db = open_bank(idem::test::connection_place(idem::test::with_port(server.conninfo(), proxy.port())));
    idem::test::slow_commits(db, "transfers");
    soci::session admin;
    idem::open_postgresql_session(admin, server.conninfo());
    http::idempotency_layer layer(db.executor(), client_scoped());
    transfer_endpoint endpoint;

    SUBCASE("it committed: the server finished the COMMIT after the connection broke") {
        const keyed_request req{.key_header = "doubt-committed"};
        auto pending = std::async(std::launch::async, [&] { return layer.handle(db, req.view(), std::ref(endpoint)); });
        wait_for_commit(admin);
        proxy.sever();
        const http::response r = pending.get();
        CHECK(r.status == 503);
        CHECK(r.body.find("Idempotency.InDoubt") != std::string::npos);
        CHECK_FALSE(r.header("Retry-After").empty());
        std::this_thread::sleep_for(1500ms);  // the server ends its COMMIT
        const http::response retry = layer.handle(db, req.view(), std::ref(endpoint));
        CHECK(retry.status == 201);
        CHECK(retry.header("Idempotent-Replayed") == "true");
        CHECK(endpoint.runs == 1);
        CHECK(balance(db, "bob") == 10);
    }
    SUBCASE("it did not: the server ended the backend during the COMMIT") {
        const keyed_request req{.key_header = "doubt-rolled-back"};
        auto pending = std::async(std::launch::async, [&] { return layer.handle(db, req.view(), std::ref(endpoint)); });
        wait_for_commit(admin);
        admin << "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep'";
        const http::response r = pending.get();
        CHECK(r.status == 503);
        CHECK(r.body.find("Idempotency.InDoubt") != std::string::npos);
        db.transact([](idem::unit_of_work& uow) { uow.sql() << "DROP TRIGGER slow_commit ON transfers"; });
        const http::response retry = layer.handle(db, req.view(), std::ref(endpoint));
        CHECK(retry.status == 201);
        CHECK(retry.header("Idempotent-Replayed").empty());  // it runs: nothing had committed
        CHECK(endpoint.runs == 2);
        CHECK(balance(db, "bob") == 10);
    }
}

TEST_CASE("HTTP in a unit of work (PostgreSQL): a database that is down answers 503 and reserves nothing") {
    idem::test::postgres_server server;
    idem::database db = open_bank(idem::test::connection_place(server.conninfo()), {.attempts = 1});
    http::idempotency_layer layer(db.executor(), client_scoped());
    transfer_endpoint endpoint;
    const keyed_request req{.key_header = "down"};
    server.stop();
    const http::response r = layer.handle(db, req.view(), std::ref(endpoint));
    CHECK(r.status == 503);
    CHECK_FALSE(r.header("Retry-After").empty());
    CHECK(r.header("Content-Type") == "application/problem+json");
    server.start();
    const http::response retry = layer.handle(db, req.view(), std::ref(endpoint));
    CHECK(retry.status == 201);
    CHECK(retry.header("Idempotent-Replayed").empty());
    CHECK(balance(db, "bob") == 10);
}

#endif
