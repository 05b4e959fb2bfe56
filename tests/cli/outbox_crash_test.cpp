// The delivery guarantee, whole, under crashes. Three processes, each on a
// database of its own: the payments service (examples/payments), which
// publishes transfer.completed and deposit.applied in the transaction that
// moves the money; `idem relay`, which delivers them; and the ledger mirror
// (examples/ledger_mirror), which applies them through idem::webhook::receiver.
// Clients move money with Idempotency-Keys and a provider delivers deposits,
// each retried until answered, while one of the three, at random, is SIGKILLed
// at a random point and started again on its port. In the end every event the
// payments service published was applied by the mirror exactly once, none is
// lost, each account's arrived in the order published, and what the mirror's
// books say each account moved is what its balance moved. On SQLite and
// PostgreSQL.
#include <doctest/doctest.h>

#include <httplib.h>
#include <signal.h>
#include <soci/soci.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bank_places.hpp"
#include "child_process.hpp"
#include "free_port.hpp"
#include "idem/database.hpp"
#include "idem/webhook.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using idem::test::child_process;

// A long-running process, started again with the same arguments (and port)
// after each kill. One that serves says so on its first line of output.
class service {
public:
    service(std::string name, std::vector<std::string> argv, bool serves, std::filesystem::path logs)
        : name_(std::move(name)), argv_(std::move(argv)), serves_(serves), logs_(std::move(logs)) {
        start();
    }

    void start() {
        idem::test::spawn_options o;
        o.argv = argv_;
        if (serves_)
            o.pipe_stdout = true;  // its errors go to the test's output
        else
            o.output_file = logs_ / (name_ + "-" + std::to_string(kills_) + ".log");
        process_ = std::make_unique<child_process>(std::move(o));
        if (!serves_) return;
        const auto line = process_->read_line(30s);
        REQUIRE_MESSAGE(line.has_value(), name_ << " did not start");
        REQUIRE_MESSAGE(line->find("listening on") != std::string::npos, *line);
    }

    void kill_and_restart() {
        process_->signal(SIGKILL);
        (void)process_->reap();
        ++kills_;
        start();
    }

    // SIGTERM: it finishes what it is doing and exits 0.
    void stop() {
        process_->signal(SIGTERM);
        REQUIRE(process_->wait_for_exit(30s));
        const int status = process_->reap();
        CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), name_ << " did not stop cleanly: " << status);
    }

    // Whether it still runs (nothing but the test ends it).
    void check_running() {
        if (process_->wait_for_exit(0ms)) FAIL_CHECK(name_ << " exited by itself: " << process_->reap());
    }
    // What the current run wrote, when it writes to a file.
    [[nodiscard]] std::string log() const {
        std::ifstream in(logs_ / (name_ + "-" + std::to_string(kills_) + ".log"));
        return {std::istreambuf_iterator<char>(in), {}};
    }

    [[nodiscard]] int kills() const { return kills_; }
    [[nodiscard]] const std::string& name() const { return name_; }

private:
    std::string name_;
    std::vector<std::string> argv_;
    bool serves_;
    std::filesystem::path logs_;
    std::unique_ptr<child_process> process_;
    int kills_ = 0;
};

constexpr int accounts = 4, operations = 300;
constexpr long long opening = 1'000'000;

std::string account(int n) {
    return "acct" + std::to_string(n);
}

// Sends one operation until the service gives its final answer: a transfer
// (201, or its replay) or a provider deposit (200). No answer (the service is
// down), 409 (its first try still holds the key) and 5xx are tried again; any
// other answer is returned as an error.
std::optional<std::string> until_answered(int port, int i, const std::string& provider_secret) {
    const bool deposit = i % 10 == 9;
    const int from = i % accounts, to = (from + 1 + (i / accounts) % (accounts - 1)) % accounts;
    const std::string body =
        deposit ? R"({"id":"evt-)" + std::to_string(i) + R"(","account":")" + account(from) + R"(","amount":100})"
                : R"({"from":")" + account(from) + R"(","to":")" + account(to) + R"(","amount":)" +
                      std::to_string(1 + i % 50) + "}";
    const std::vector<std::string> secrets{provider_secret};
    for (;;) {
        httplib::Client c("127.0.0.1", port);
        c.set_connection_timeout(2s);
        c.set_read_timeout(10s);
        const httplib::Result r =
            deposit
                ? c.Post("/webhooks/provider",
                         {{"Provider-Signature",
                           idem::webhook::sign_timestamped(secrets, body, std::chrono::system_clock::now())}},
                         body, "application/json")
                : c.Post("/transfers",
                         {{"Authorization", "Bearer crash-test"}, {"Idempotency-Key", "transfer-" + std::to_string(i)}},
                         body, "application/json");
        if (r && r->status == (deposit ? 200 : 201)) return std::nullopt;
        if (r && r->status != 409 && r->status < 500)
            return "operation " + std::to_string(i) + " answered " + std::to_string(r->status) + ": " + r->body;
        std::this_thread::sleep_for(20ms);
    }
}

long long now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A column's value as text, whichever type the dialect reads it as ("-" for NULL).
std::string text_of(const soci::row& row, std::size_t i) {
    if (row.get_indicator(i) == soci::i_null) return "-";
    switch (row.get_properties(i).get_data_type()) {
        case soci::dt_string: return row.get<std::string>(i);
        case soci::dt_integer: return std::to_string(row.get<int>(i));
        case soci::dt_long_long: return std::to_string(row.get<long long>(i));
        case soci::dt_unsigned_long_long: return std::to_string(row.get<unsigned long long>(i));
        case soci::dt_double: return std::to_string(row.get<double>(i));
        default: return "?";
    }
}

// The undelivered messages, one line each, for a failure's diagnosis.
std::vector<std::string> undelivered_lines(idem::database& db, long long now) {
    return db.read([&](soci::session& s) {
        std::vector<std::string> out;
        soci::rowset<soci::row> rows = (s.prepare << "SELECT ordering_key, state, attempts, available_at, claim, "
                                                     "last_answer FROM idem_outbox WHERE state <> 1 ORDER BY seq");
        for (const soci::row& row : rows) {
            const std::string due = text_of(row, 3);
            out.push_back("key " + text_of(row, 0) + ": state " + text_of(row, 1) + ", attempts " + text_of(row, 2) +
                          ", due in " + (due == "-" ? due : std::to_string(std::stoll(due) - now)) + " ms, claim " +
                          text_of(row, 4) + ", answer " + text_of(row, 5));
        }
        return out;
    });
}

// (ordering key, message id) in the order `sql` reads them.
std::vector<std::pair<std::string, std::string>> keyed_ids(idem::database& db, const std::string& sql) {
    return db.read([&](soci::session& s) {
        std::vector<std::pair<std::string, std::string>> out;
        soci::rowset<soci::row> rows = (s.prepare << sql);
        for (const soci::row& row : rows) out.emplace_back(row.get<std::string>(0), row.get<std::string>(1));
        return out;
    });
}

}  // namespace

TEST_CASE(
    "payments, idem relay and the ledger mirror SIGKILLed at random under load: every event applied once "
    "downstream, none lost, in order per account") {
    auto payments_places = idem::test::places(), mirror_places = idem::test::places();
    for (std::size_t backend = 0; backend < payments_places.size(); ++backend) {
        const std::string payments_db = payments_places[backend]->url(), mirror_db = mirror_places[backend]->url();
        CAPTURE(payments_db);
        idem::test::temp_dir logs{"outbox-crash"};
        const std::string provider_secret = "whsec-provider", relay_secret = "whsec-relay";
        const int payments_port = idem::test::free_loopback_port(), mirror_port = idem::test::free_loopback_port();

        service payments("payments",
                         {IDEM_PAYMENTS_BINARY, "--db", payments_db, "--port", std::to_string(payments_port),
                          "--threads", "8", "--webhook-secret", provider_secret},
                         true, logs.path());
        for (int a = 0; a < accounts; ++a) {
            httplib::Client c("127.0.0.1", payments_port);
            const auto r = c.Post(
                "/accounts", {{"Authorization", "Bearer crash-test"}, {"Idempotency-Key", "open-" + account(a)}},
                R"({"id":")" + account(a) + R"(","balance":)" + std::to_string(opening) + "}", "application/json");
            REQUIRE(r);
            REQUIRE(r->status == 201);
        }
        service mirror("mirror",
                       {IDEM_LEDGER_MIRROR_BINARY, "--db", mirror_db, "--port", std::to_string(mirror_port), "--secret",
                        relay_secret},
                       true, logs.path());
        // Short leases and backoffs, so that what a kill interrupts comes due again within the test.
        service relay("relay",
                      {IDEM_BINARY,
                       "relay",
                       "--db",
                       payments_db,
                       "--to",
                       "http://127.0.0.1:" + std::to_string(mirror_port) + "/events",
                       "--secret",
                       relay_secret,
                       "--batch",
                       "4",
                       "--threads",
                       "4",
                       "--lease",
                       "1s",
                       "--first-backoff",
                       "1s",
                       "--max-backoff",
                       "1s",
                       "--max-attempts",
                       "1000"},
                      false, logs.path());

        // The load: four clients, each operation retried until answered.
        std::atomic<int> next{0};
        std::mutex mutex;
        std::vector<std::string> refused;
        std::vector<std::thread> clients;
        for (int c = 0; c < 4; ++c)
            clients.emplace_back([&] {
                for (int i = next++; i < operations; i = next++) {
                    if (auto error = until_answered(payments_port, i, provider_secret)) {
                        std::lock_guard lock(mutex);
                        refused.push_back(std::move(*error));
                    }
                    std::this_thread::sleep_for(80ms);
                }
            });
        // Meanwhile one of the three at random, at a random moment, every 150 to 450 ms; each at least twice.
        std::minstd_rand random(backend + 1);
        std::vector<service*> all{&payments, &relay, &mirror};
        const auto done = [&] { return next.load() >= operations + 4; };
        auto kill_one = [&](service& s) {
            std::this_thread::sleep_for(std::chrono::milliseconds(150 + random() % 300));
            s.kill_and_restart();
        };
        while (!done()) kill_one(*all[random() % all.size()]);
        for (service* s : all)
            while (s->kills() < 2) kill_one(*s);
        for (std::thread& t : clients) t.join();
        CHECK(refused.empty());
        for (const std::string& r : refused) MESSAGE(r);

        // Everything runs now: the relay delivers what is left, the killed claims' too once their leases end.
        for (service* s : all) s->check_running();
        idem::database payments_view = idem::database::open(payments_db);
        idem::database mirror_view = idem::database::open(mirror_db);
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        // Not delivered yet: what waits in the outbox's intake too (one read of both).
        const std::string undelivered =
            "SELECT (SELECT COUNT(*) FROM idem_outbox WHERE state <> 1) + (SELECT COUNT(*) FROM idem_outbox_intake)";
        while (idem::test::count_rows(payments_view, undelivered) > 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(50ms);
        for (service* s : all) s->check_running();
        // What is left, should something be (a failure's diagnosis).
        if (idem::test::count_rows(payments_view, undelivered) > 0) MESSAGE("the relay's output:\n" << relay.log());
        for (const std::string& line : undelivered_lines(payments_view, now_ms())) MESSAGE("undelivered, " << line);
        std::this_thread::sleep_for(1500ms);  // a claim still held would be delivered again meanwhile
        relay.stop();
        mirror.stop();
        for (service* s : all) MESSAGE(s->name() << " killed " << s->kills() << " times");

        // Every operation happened once on the payments side, and published one event.
        CHECK(idem::test::count_rows(payments_view, "SELECT COUNT(*) FROM transfers") == operations * 9 / 10);
        CHECK(idem::test::count_rows(payments_view, "SELECT COUNT(*) FROM deposits") == operations / 10);
        CHECK(idem::test::count_rows(payments_view, "SELECT COUNT(*) FROM idem_outbox") == operations);
        CHECK(idem::test::count_rows(payments_view, undelivered) == 0);

        // Downstream: each of them applied exactly once, none lost, none other.
        const auto published = keyed_ids(payments_view, "SELECT ordering_key, id FROM idem_outbox ORDER BY seq");
        const auto applied =
            keyed_ids(mirror_view, "SELECT ordering_key, event_id FROM mirror_events ORDER BY position");
        CHECK(applied.size() == published.size());
        std::set<std::string> published_ids, applied_ids;
        for (const auto& [key, id] : published) published_ids.insert(id);
        for (const auto& [key, id] : applied) applied_ids.insert(id);
        CHECK(applied_ids.size() == applied.size());  // none twice
        CHECK(applied_ids == published_ids);          // none lost, none other

        // Each account's events in the order they were published.
        std::map<std::string, std::vector<std::string>> published_order, applied_order;
        for (const auto& [key, id] : published) published_order[key].push_back(id);
        for (const auto& [key, id] : applied) applied_order[key].push_back(id);
        CHECK(published_order.size() == static_cast<std::size_t>(accounts));
        for (const auto& [key, ids] : published_order) {
            CAPTURE(key);
            CHECK(applied_order[key] == ids);
        }

        // The mirror's books: what each account moved, as its balance says.
        for (int a = 0; a < accounts; ++a) {
            CAPTURE(account(a));
            const long long net = idem::test::count_rows(
                mirror_view, "SELECT COALESCE((SELECT net FROM mirror_accounts WHERE id = '" + account(a) + "'), 0)");
            CHECK(net == idem::test::balance(payments_view, account(a)) - opening);
        }
        payments.stop();
    }
}

namespace {

// Runs `idem ARGS...` to its end; its exit status, its output in `output`.
int run_idem(const std::vector<std::string>& args, const std::filesystem::path& output) {
    idem::test::spawn_options o;
    o.argv = {IDEM_BINARY};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.output_file = output;
    child_process p(std::move(o));
    REQUIRE(p.wait_for_exit(60s));
    const int status = p.reap();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_text(const std::filesystem::path& file) {
    std::ifstream in(file);
    return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE(
    "a transfer run twice under one key (Observe, Off, Enforce after its record expired and after idem forget): "
    "both runs' events reach the ledger mirror, whose books equal the ledger's") {
    struct way {
        const char* name;
        std::vector<std::string> flags;
        const char* between;  // what happens between the two POSTs
    };
    const std::vector<way> ways = {
        {"observe", {"--mode", "observe"}, ""},
        {"off", {"--mode", "off"}, ""},
        {"enforce, record expired", {}, "expire"},
        {"enforce, record forgotten", {}, "forget"},
    };
    for (const idem::test::place_factory fresh_place : idem::test::place_factories()) {
        for (const way& w : ways) {
            // Each way on databases of its own.
            const auto payments_place = fresh_place(), mirror_place = fresh_place();
            const std::string payments_db = payments_place->url(), mirror_db = mirror_place->url();
            CAPTURE(payments_db);
            const std::string way_name = w.name;
            CAPTURE(way_name);
            idem::test::temp_dir logs{"outbox-twice"};
            const std::string relay_secret = "whsec-relay";
            const int payments_port = idem::test::free_loopback_port(), mirror_port = idem::test::free_loopback_port();
            std::vector<std::string> argv{IDEM_PAYMENTS_BINARY, "--db", payments_db, "--port",
                                          std::to_string(payments_port)};
            argv.insert(argv.end(), w.flags.begin(), w.flags.end());
            if (std::string_view(w.between) == "expire") {
                std::ofstream(logs.path() / "options.json") << R"({"mode":"enforce","lease":"1s","retention":"2s"})";
                argv.insert(argv.end(), {"--options", (logs.path() / "options.json").string()});
            }
            service payments("payments", argv, true, logs.path());
            service mirror("mirror",
                           {IDEM_LEDGER_MIRROR_BINARY, "--db", mirror_db, "--port", std::to_string(mirror_port),
                            "--secret", relay_secret},
                           true, logs.path());
            httplib::Client c("127.0.0.1", payments_port);
            const httplib::Headers auth{{"Authorization", "Bearer mirror-test"}};
            for (const auto& [id, opening_balance] : {std::pair{"alice", 10000}, std::pair{"bob", 0}}) {
                httplib::Headers h = auth;
                h.emplace("Idempotency-Key", std::string("open-") + id);
                const auto r =
                    c.Post("/accounts", h,
                           R"({"id":")" + std::string(id) + R"(","balance":)" + std::to_string(opening_balance) + "}",
                           "application/json");
                REQUIRE(r);
                REQUIRE(r->status == 201);
            }
            httplib::Headers h = auth;
            h.emplace("Idempotency-Key", "pay-bob-once");
            const std::string transfer = R"({"from":"alice","to":"bob","amount":500})";
            const auto first = c.Post("/transfers", h, transfer, "application/json");
            REQUIRE(first);
            CHECK(first->status == 201);
            idem::database payments_view = idem::database::open(payments_db);
            if (std::string_view(w.between) == "expire") {
                std::this_thread::sleep_for(2200ms);
            } else if (std::string_view(w.between) == "forget") {
                CHECK(run_idem({"forget", "--db", payments_db, "--namespace", "http", "--client", "mirror-test",
                                "--key", "pay-bob-once"},
                               logs.path() / "forget.log") == 0);
            }
            const auto second = c.Post("/transfers", h, transfer, "application/json");
            REQUIRE(second);
            CHECK(second->status == 201);
            CHECK(second->get_header_value("Idempotent-Replayed") != "true");
            // The ledger moved the money twice.
            CHECK(idem::test::balance(payments_view, "alice") == 9000);
            CHECK(idem::test::balance(payments_view, "bob") == 1000);

            CHECK(run_idem({"relay", "--db", payments_db, "--to",
                            "http://127.0.0.1:" + std::to_string(mirror_port) + "/events", "--secret", relay_secret,
                            "--drain"},
                           logs.path() / "relay.log") == 0);
            INFO("the relay said: " << read_text(logs.path() / "relay.log"));
            CHECK(idem::test::count_rows(payments_view, "SELECT COUNT(*) FROM idem_outbox WHERE state <> 1") == 0);
            CHECK(idem::test::count_rows(payments_view, "SELECT COUNT(*) FROM idem_outbox_intake") == 0);
            idem::database mirror_view = idem::database::open(mirror_db);
            for (const char* id : {"alice", "bob"}) {
                CAPTURE(id);
                const long long net = idem::test::count_rows(
                    mirror_view,
                    "SELECT COALESCE((SELECT net FROM mirror_accounts WHERE id = '" + std::string(id) + "'), 0)");
                CHECK(net == idem::test::balance(payments_view, id) - (std::string_view(id) == "alice" ? 10000 : 0));
            }
            mirror.stop();
            payments.stop();
        }
    }
}
