// The transactional outbox's costs on one database, in one run:
// - publish: the transfer through db.once (two of 10,000 accounts, a transfer
//   row, the record) with one published message against the same transfer
//   without it, in alternating rounds: transfers/s and their ratio;
// - relay: --messages messages prefilled, delivered to a callback sink that
//   counts them, by one relay thread and by four, without ordering keys and
//   with 1,000 of them (each message waits for the one before of its key): messages/s.
//   idem-outbox-bench URL [--rounds N] [--seconds S] [--messages N] [--batch N]
#include <soci/soci.h>
#include <idem/database.hpp>
#include <idem/outbox_relay.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <random>
#include <string>
#include <thread>

#include "harness.hpp"

namespace {

constexpr int accounts = 10000;

void transfer(idem::database& db, std::uint64_t n, bool publish) {
    static std::atomic<std::uint64_t> serial{0};
    thread_local std::minstd_rand random{std::random_device{}()};
    const long long from = random() % accounts, to = (from + 1 + random() % (accounts - 1)) % accounts;
    const std::string key = std::to_string(serial++) + (publish ? "p" : "b");
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
    (void)n;
    if (e.status() != idem::execution_status::executed) throw std::logic_error("a transfer did not execute");
}

double relay_rate(idem::database& db, std::size_t messages, int threads, std::size_t batch, bool keyed) {
    db.transact([&](idem::unit_of_work& uow) { uow.sql() << "DELETE FROM idem_outbox"; });
    for (std::size_t done = 0; done < messages;) {
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < 1000 && done < messages; ++i, ++done)
                (void)uow.publish({.topic = "t",
                                   .payload = std::string(200, 'x'),
                                   .ordering_key = keyed ? std::optional(std::to_string(done % 1000)) : std::nullopt});
        });
    }
    std::atomic<std::size_t> delivered{0};
    auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery&) {
        ++delivered;
        return idem::delivery_result::delivered();
    });
    idem::outbox_relay relay(db, sink, {.batch = batch, .threads = threads, .idle_wait = std::chrono::milliseconds(1)});
    const auto start = std::chrono::steady_clock::now();
    relay.start();
    while (delivered < messages) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    relay.stop();
    return static_cast<double>(messages) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: idem-outbox-bench URL [--rounds N] [--seconds S] [--messages N] [--batch N]\n";
        return 2;
    }
    int rounds = 5;
    double seconds = 1;
    std::size_t messages = 20000, batch = 200;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--rounds") rounds = std::stoi(argv[i + 1]);
        if (flag == "--seconds") seconds = std::stod(argv[i + 1]);
        if (flag == "--messages") messages = std::stoul(argv[i + 1]);
        if (flag == "--batch") batch = std::stoul(argv[i + 1]);
    }
    idem::database db = idem::database::open(argv[1], {.pool_size = 8});
    db.migrate();
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS bench_transfers (id TEXT PRIMARY KEY, from_account BIGINT NOT NULL, "
                     "to_account BIGINT NOT NULL)";
        long long n = 0;
        uow.sql() << "SELECT COUNT(*) FROM bench_accounts", soci::into(n);
        for (long long i = n; i < accounts; ++i)
            uow.sql() << "INSERT INTO bench_accounts (id, balance) VALUES (:i, 1000000)", soci::use(i);
    });
    const auto span = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    const idem::bench::paired publish = idem::bench::compare(
        [&] { return idem::bench::measure([&](std::uint64_t n) { transfer(db, n, true); }, span); },
        [&] { return idem::bench::measure([&](std::uint64_t n) { transfer(db, n, false); }, span); }, rounds);
    std::cout << "publish: transfer with one message " << static_cast<long long>(publish.subject.per_second)
              << "/s, without " << static_cast<long long>(publish.baseline.per_second) << "/s, ratio "
              << publish.subject.per_second / publish.baseline.per_second << '\n';
    for (const bool keyed : {false, true})
        for (const int threads : {1, 4})
            std::cout << "relay to a callback sink, " << threads << " thread" << (threads == 1 ? "" : "s") << ", batch "
                      << batch << (keyed ? ", 1,000 ordering keys" : ", no ordering key") << ": "
                      << static_cast<long long>(relay_rate(db, messages, threads, batch, keyed)) << " messages/s\n";
}
