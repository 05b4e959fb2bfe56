// The transactional outbox's costs on one database, in one run. --parts picks
// (publish,relay,lag,http by default; purge on PostgreSQL when asked):
// - publish: the transfer through db.once (two of 10,000 accounts, a transfer
//   row, the record) with one published message against the same transfer
//   without it, in alternating rounds: transfers/s and their ratio;
// - relay: --messages messages prefilled, delivered to a callback sink that
//   counts them, by one relay thread and by four, without ordering keys and
//   with 1,000 of them (each message waits for the one before of its key);
//   and all in one queue behind a single key (--queue, a tenth as many);
//   --repeat runs of each, in turn: the median, the lowest and the highest;
// - lag: --rate messages/s published one per transaction for --lag-seconds,
//   delivered by one relay thread to a callback sink as they come: the time
//   from publication to the sink, p50/p99/max, with the relay's idle wait at
//   its default (200 ms) and at 10 ms;
// - http: --http-messages prefilled, delivered by idem::http::webhook_sink
//   over keep-alive to a server on loopback in this process that answers 200
//   at once, and to an idem::webhook::receiver that records each message in a
//   database of its own (--receiver URL), by one relay thread and by four;
// - purge (PostgreSQL): an outbox of --rows delivered messages filled by the
//   server (generate_series), the oldest --expired of them delivered two days
//   ago, the rest an hour ago; idem::purge_delivered_messages (older than a
//   day, batches of 1000) while one thread publishes, against the same
//   publishing alone: rows/s, and publish p50/p99 during and without.
//   idem-outbox-bench URL [--parts LIST] [--rounds N] [--seconds S] [--messages N] [--batch N] [--queue N] [--repeat N]
//                         [--rate N] [--lag-seconds S] [--http-messages N] [--receiver URL]
//                         [--rows N] [--expired N]
#include <httplib.h>
#include <soci/soci.h>
#include <idem/database.hpp>
#include <idem/http/httplib.hpp>
#include <idem/http/webhook_sink.hpp>
#include <idem/outbox_relay.hpp>
#include <idem/webhook.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#ifdef IDEM_BENCH_POSTGRESQL
#include "pq.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr int accounts = 10000;

struct arguments {
    std::string url;
    std::string parts = "publish,relay,lag,http";
    int rounds = 5;
    double seconds = 1;
    std::size_t messages = 20000, batch = 200;
    std::size_t queue = 0;  // the one-key queue's length (0: a tenth of messages)
    int repeat = 5;
    int rate = 200;
    double lag_seconds = 10;
    std::size_t http_messages = 2000;
    std::string receiver;
    std::size_t rows = 10'000'000, expired = 0;

    [[nodiscard]] bool runs(const std::string& part) const {
        return ("," + parts + ",").find("," + part + ",") != std::string::npos;
    }
};

std::string fixed(double v, int digits = 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", digits, v);
    return text;
}

double seconds_since(steady::time_point start) {
    return std::chrono::duration<double>(steady::now() - start).count();
}

// The value at `fraction` (0.5, 0.99) of sorted `v`; 0 for none.
double percentile(std::vector<double> v, double fraction) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(static_cast<double>(v.size()) * fraction))];
}

// "median (lowest to highest)" of rates.
std::string spread(const std::vector<double>& rates) {
    const auto [low, high] = std::minmax_element(rates.begin(), rates.end());
    return fixed(idem::bench::median(rates)) + "/s (" + fixed(*low) + " to " + fixed(*high) + ")";
}

void transfer(idem::database& db, bool publish) {
    static std::atomic<std::uint64_t> serial{0};
    static const std::string run = std::to_string(std::random_device{}()) + "-";  // keys of their own every run
    thread_local std::minstd_rand random{std::random_device{}()};
    const long long from = random() % accounts, to = (from + 1 + random() % (accounts - 1)) % accounts;
    const std::string key = run + std::to_string(serial++) + (publish ? "p" : "b");
    auto e = db.once(idem::record_key{"bench.transfer", key}, "fp", [&](idem::unit_of_work& uow) {
        uow.sql() << "UPDATE bench_accounts SET balance = balance - 1 WHERE id = :f", soci::use(from);
        uow.sql() << "UPDATE bench_accounts SET balance = balance + 1 WHERE id = :t", soci::use(to);
        uow.sql() << "INSERT INTO bench_transfers (id, from_account, to_account) VALUES (:k, :f, :t)", soci::use(key),
            soci::use(from), soci::use(to);
        if (publish)
            (void)uow.publish({.topic = "transfer.completed",
                               .payload = R"({"id":")" + key + R"(","from":)" + std::to_string(from) + R"(,"to":)" +
                                          std::to_string(to) + R"(,"amount":1})",
                               .ordering_key = std::to_string(from)});
    });
    if (e.status() != idem::execution_status::executed) throw std::logic_error("a transfer did not execute");
}

void create_bank(idem::database& db) {
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS bench_transfers (id TEXT PRIMARY KEY, from_account BIGINT NOT NULL, "
                     "to_account BIGINT NOT NULL)";
        long long n = 0;
        uow.sql() << "SELECT COUNT(*) FROM bench_accounts", soci::into(n);
        for (long long i = n; i < accounts; ++i)
            uow.sql() << "INSERT INTO bench_accounts (id, balance) VALUES (:i, 1000000)", soci::use(i);
    });
}

// An empty outbox (every run starts from the same table), then `messages` of
// 200 bytes published by the client, 1,000 to a transaction, with `keys`
// ordering keys in turn (0: none).
void prefill(idem::database& db, std::size_t messages, std::size_t keys) {
    const bool postgresql = db.engine() == "postgresql";
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << (postgresql ? "TRUNCATE idem_outbox" : "DELETE FROM idem_outbox");
        if (!postgresql) uow.sql() << "DELETE FROM idem_outbox_intake";
    });
    for (std::size_t done = 0; done < messages;) {
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < 1000 && done < messages; ++i, ++done)
                (void)uow.publish(
                    {.topic = "t",
                     .payload = std::string(200, 'x'),
                     .ordering_key = keys > 0 ? std::optional(std::to_string(done % keys)) : std::nullopt});
        });
    }
}

// Delivers what is in the outbox to `sink` with `threads` relay threads; messages/s.
double drain_rate(idem::database& db, const std::shared_ptr<idem::outbox_sink>& sink,
                  const std::atomic<std::size_t>& delivered, std::size_t messages, int threads, std::size_t batch) {
    idem::outbox_relay relay(db, sink, {.batch = batch, .threads = threads, .idle_wait = 1ms});
    const auto start = steady::now();
    relay.start();
    while (delivered < messages) std::this_thread::sleep_for(1ms);
    const double seconds = seconds_since(start);
    relay.stop();
    return static_cast<double>(messages) / seconds;
}

void relay_part(idem::database& db, const arguments& a) {
    struct config {
        std::size_t keys;
        int threads;
        std::size_t messages;
        std::vector<double> rates = {};
    };
    // One key: every message waits for the one before, --queue of them.
    const std::size_t queue = a.queue != 0 ? a.queue : a.messages / 10;
    std::vector<config> configs{{0, 1, a.messages},    {0, 4, a.messages}, {1000, 1, a.messages},
                                {1000, 4, a.messages}, {1, 1, queue},      {1, 4, queue}};
    for (int run = 0; run < a.repeat; ++run)
        for (config& c : configs) {
            prefill(db, c.messages, c.keys);
            std::atomic<std::size_t> delivered{0};
            auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery&) {
                ++delivered;
                return idem::delivery_result::delivered();
            });
            c.rates.push_back(drain_rate(db, sink, delivered, c.messages, c.threads, a.batch));
        }
    for (const config& c : configs)
        std::cout << "relay to a callback sink, " << c.threads << " thread" << (c.threads == 1 ? "" : "s") << ", batch "
                  << a.batch << ", "
                  << (c.keys == 0 ? std::string("no ordering key")
                                  : std::to_string(c.keys) + " ordering key" + (c.keys == 1 ? "" : "s"))
                  << ", " << c.messages << " messages, " << a.repeat << " runs: " << spread(c.rates) << '\n';
}

// Publishes `rate` messages a second, one per transaction, for `seconds`, while
// one relay thread delivers them; prints the lag from publication to the sink.
void lag_run(idem::database& db, const arguments& a, std::chrono::milliseconds idle_wait) {
    prefill(db, 0, 0);
    std::mutex mutex;
    std::vector<double> lags_ms;
    std::atomic<std::size_t> delivered{0};
    auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery& m) {
        const auto lag = std::chrono::system_clock::now() - m.published_at;
        {
            std::lock_guard lock(mutex);
            lags_ms.push_back(std::chrono::duration<double, std::milli>(lag).count());
        }
        ++delivered;
        return idem::delivery_result::delivered();
    });
    idem::outbox_relay relay(db, sink, {.idle_wait = idle_wait});
    relay.start();
    // Message i is due at start + i / rate; publishers take the next one in turn.
    const auto start = steady::now();
    const auto total = static_cast<std::size_t>(a.rate * a.lag_seconds);
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> publishers;
    for (int p = 0; p < 4; ++p)
        publishers.emplace_back([&] {
            for (std::size_t i = next++; i < total; i = next++) {
                std::this_thread::sleep_until(start + std::chrono::microseconds(i * 1'000'000 / a.rate));
                db.transact([&](idem::unit_of_work& uow) {
                    (void)uow.publish({.topic = "t", .payload = std::string(200, 'x')});
                });
            }
        });
    for (std::thread& t : publishers) t.join();
    const double published_in = seconds_since(start);
    while (delivered < total) std::this_thread::sleep_for(1ms);
    relay.stop();
    std::cout << "lag, " << a.rate << " messages/s published one per transaction (reached "
              << fixed(static_cast<double>(total) / published_in) << "/s) for " << fixed(a.lag_seconds) << " s, "
              << "one relay thread, idle wait " << idle_wait.count() << " ms: p50 "
              << fixed(percentile(lags_ms, 0.5), 1) << " ms, p99 " << fixed(percentile(lags_ms, 0.99), 1) << " ms, max "
              << fixed(percentile(lags_ms, 1), 1) << " ms\n";
}

// A server on loopback answering POST /events: 200 at once, or through an idem
// webhook receiver recording each message in `receiver_db`.
class receiving_server {
public:
    explicit receiving_server(idem::database* receiver_db) : db_(receiver_db) {
        if (db_ != nullptr) {
            db_->migrate();
            db_->transact([](idem::unit_of_work& uow) {
                uow.sql() << "CREATE TABLE IF NOT EXISTS bench_received (id TEXT PRIMARY KEY, bytes BIGINT NOT NULL)";
            });
            receiver_.emplace(db_->executor(),
                              idem::webhook::receiver_options{
                                  .provider = "bench",
                                  .scheme = idem::webhook::timestamped_signature{},
                                  .secrets = {"secret"},
                                  .identify = idem::webhook::id_from_header("Idem-Message-Id", idem::scope::global())});
        }
        server_.new_task_queue = [] { return new httplib::ThreadPool(8); };
        server_.Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
            if (!receiver_) {
                res.status = 200;
                return;
            }
            idem::webhook::delivery d{.body = req.body};
            for (const auto& [name, value] : req.headers) d.headers.emplace_back(name, value);
            const auto answer = receiver_->handle(*db_, d, [](idem::unit_of_work& uow, const idem::webhook::event& e) {
                const std::string id(e.id);
                const long long bytes = static_cast<long long>(e.body.size());
                uow.sql() << "INSERT INTO bench_received (id, bytes) VALUES (:i, :b)", soci::use(id), soci::use(bytes);
                return idem::webhook::handler_result::applied();
            });
            res.status = answer.status;
            res.set_content(answer.body, "application/json");
        });
        port_ = idem::http::bind_with_backlog(server_, "127.0.0.1", 0);
        thread_ = std::thread([this] { server_.listen_after_bind(); });
        while (!server_.is_running()) std::this_thread::sleep_for(1ms);
    }
    ~receiving_server() {
        server_.stop();
        thread_.join();
    }
    [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/events"; }

private:
    idem::database* db_;
    std::optional<idem::webhook::receiver> receiver_;
    httplib::Server server_;
    std::thread thread_;
    int port_ = 0;
};

// A webhook_sink that counts what it delivered.
class counting_sink final : public idem::outbox_sink {
public:
    counting_sink(std::string url, std::atomic<std::size_t>& delivered)
        : http_(idem::http::webhook_sink_options{.url = std::move(url), .secrets = {"secret"}}),
          delivered_(delivered) {}
    idem::delivery_result deliver(const idem::outbox_delivery& m) override {
        auto result = http_.deliver(m);
        if (result.what() == idem::delivery_result::kind::delivered) ++delivered_;
        return result;
    }

private:
    idem::http::webhook_sink http_;
    std::atomic<std::size_t>& delivered_;
};

void http_part(idem::database& db, const arguments& a) {
    std::optional<idem::database> receiver_db;
    if (!a.receiver.empty()) receiver_db.emplace(idem::database::open(a.receiver, {.pool_size = 8}));
    for (const bool recording : {false, true}) {
        if (recording && !receiver_db) continue;
        const receiving_server server(recording ? &*receiver_db : nullptr);
        for (const int threads : {1, 4}) {
            prefill(db, a.http_messages, 0);
            std::atomic<std::size_t> delivered{0};
            auto sink = std::make_shared<counting_sink>(server.url(), delivered);
            const double rate = drain_rate(db, sink, delivered, a.http_messages, threads, a.batch);
            std::cout << "relay to the HTTP sink over keep-alive, "
                      << (recording ? "an idem webhook receiver recording each in its database"
                                    : "a receiver answering 200 at once")
                      << ", " << threads << " thread" << (threads == 1 ? "" : "s") << ", " << a.http_messages
                      << " messages: " << fixed(rate) << " messages/s\n";
        }
    }
}

#ifdef IDEM_BENCH_POSTGRESQL
// Publish latencies (one message per transaction), in microseconds, until `stop`.
std::vector<double> publish_latencies(idem::database& db, const std::atomic<bool>& stop) {
    std::vector<double> us;
    while (!stop) {
        const auto start = steady::now();
        db.transact([&](idem::unit_of_work& uow) {
            (void)uow.publish({.topic = "transfer.completed", .payload = std::string(200, 'x'), .ordering_key = "a"});
        });
        us.push_back(std::chrono::duration<double, std::micro>(steady::now() - start).count());
    }
    return us;
}

void purge_part(idem::database& db, const arguments& a) {
    const std::size_t expired = a.expired != 0 ? a.expired : a.rows / 10;
    PGconn* conn = PQconnectdb(a.url.c_str());
    if (PQstatus(conn) != CONNECTION_OK) idem::bench::pq::fail(conn, "connecting");
    const auto filling = steady::now();
    // Delivered messages as a retention window leaves them: in publication
    // order, 100-byte payloads, 10,000 ordering keys; milliseconds since the epoch.
    const std::string n = std::to_string(a.rows), old = std::to_string(expired);
    idem::bench::pq::refill(
        conn, "idem_outbox",
        "INSERT INTO idem_outbox (id, topic, ordering_key, headers, payload, state, attempts, created_at, "
        "available_at, done_at) "
        "SELECT md5(i::text), 'transfer.completed', (i % 10000)::text, '', "
        "convert_to(md5(i::text) || md5((-i)::text) || md5((i + 1)::text) || left(md5((i + 2)::text), 4), 'UTF8'), "
        "1, 1, at, at, at + 10 "
        "FROM generate_series(1, " +
            n + ") AS i, LATERAL (SELECT (extract(epoch FROM now()) * 1000)::bigint - (CASE WHEN i <= " + old +
            " THEN 172800000 ELSE 3600000 END) + i / 1000 AS at) AS t");
    const double fill_s = seconds_since(filling);
    const auto table_bytes = idem::bench::pq::column(conn, "SELECT pg_total_relation_size('idem_outbox')");
    PQfinish(conn);
    std::cerr << "filled " << a.rows << " delivered messages (" << expired << " to purge) in " << fixed(fill_s)
              << " s, " << table_bytes.at(0) << " bytes\n";

    std::atomic<bool> stop_alone{false};
    std::vector<double> alone;
    std::thread quiet([&] { alone = publish_latencies(db, stop_alone); });
    std::this_thread::sleep_for(5s);
    stop_alone = true;
    quiet.join();

    std::atomic<bool> stop{false};
    std::vector<double> during;
    std::thread traffic([&] { during = publish_latencies(db, stop); });
    const idem::purge_result purged = idem::purge_delivered_messages(db, {.batch = 1000, .older_than = 24h});
    stop = true;
    traffic.join();
    const double wall_s = std::chrono::duration<double>(purged.elapsed).count();
    std::cout << "purge " << purged.deleted << " delivered messages of " << a.rows
              << " (purge_delivered_messages, batches of 1000): " << fixed(static_cast<double>(purged.deleted) / wall_s)
              << " rows/s (" << fixed(wall_s, 1) << " s, " << purged.batches
              << " batches, with its rests); publish p50/p99 " << fixed(percentile(during, 0.5)) << "/"
              << fixed(percentile(during, 0.99)) << " us during (" << during.size() << " transactions) vs "
              << fixed(percentile(alone, 0.5)) << "/" << fixed(percentile(alone, 0.99)) << " us without ("
              << alone.size() << "); table " << table_bytes.at(0) << " bytes, filled in " << fixed(fill_s) << " s\n";
}
#endif

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr
            << "usage: idem-outbox-bench URL [--parts publish,relay,lag,http,purge] [--rounds N] [--seconds S] "
               "[--messages N] [--batch N] [--queue N] [--repeat N] [--rate N] [--lag-seconds S] [--http-messages N] "
               "[--receiver URL] [--rows N] [--expired N]\n";
        return 2;
    }
    arguments a;
    a.url = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--parts")
            a.parts = value;
        else if (flag == "--rounds")
            a.rounds = std::stoi(value);
        else if (flag == "--seconds")
            a.seconds = std::stod(value);
        else if (flag == "--messages")
            a.messages = std::stoul(value);
        else if (flag == "--batch")
            a.batch = std::stoul(value);
        else if (flag == "--queue")
            a.queue = std::stoul(value);
        else if (flag == "--repeat")
            a.repeat = std::stoi(value);
        else if (flag == "--rate")
            a.rate = std::stoi(value);
        else if (flag == "--lag-seconds")
            a.lag_seconds = std::stod(value);
        else if (flag == "--http-messages")
            a.http_messages = std::stoul(value);
        else if (flag == "--receiver")
            a.receiver = value;
        else if (flag == "--rows")
            a.rows = std::stoul(value);
        else if (flag == "--expired")
            a.expired = std::stoul(value);
        else {
            std::cerr << "unknown option " << flag << '\n';
            return 2;
        }
    }
    idem::database db = idem::database::open(a.url, {.pool_size = 8});
    db.migrate();
    if (a.runs("publish")) {
        create_bank(db);
        const auto span = std::chrono::milliseconds(static_cast<long long>(a.seconds * 1000));
        const idem::bench::paired publish = idem::bench::compare(
            [&] { return idem::bench::measure([&](std::uint64_t) { transfer(db, true); }, span); },
            [&] { return idem::bench::measure([&](std::uint64_t) { transfer(db, false); }, span); }, a.rounds);
        std::cout << "publish: transfer with one message " << fixed(publish.subject.per_second) << "/s, without "
                  << fixed(publish.baseline.per_second) << "/s, ratio "
                  << fixed(publish.subject.per_second / publish.baseline.per_second, 2) << '\n';
    }
    if (a.runs("relay")) relay_part(db, a);
    if (a.runs("lag"))
        for (const auto idle_wait : {200ms, 10ms}) lag_run(db, a, idle_wait);
    if (a.runs("http")) http_part(db, a);
    if (a.runs("purge")) {
#ifdef IDEM_BENCH_POSTGRESQL
        if (db.engine() != "postgresql") throw std::invalid_argument("the purge part runs on PostgreSQL");
        purge_part(db, a);
#else
        throw std::invalid_argument("the purge part needs the PostgreSQL store");
#endif
    }
}
