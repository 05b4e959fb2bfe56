// What sealing stored results costs, on one database in one run: the
// steady-state transfer through db.once (random accounts among 100,000, the
// record table prefilled), its result a 400-byte JSON response, with
// encryption keys and without, in alternating rounds, one client; then the
// replays of those records, sealed and not. Rates and their ratios.
// SQLite at synchronous NORMAL and PostgreSQL with synchronous_commit off (the
// script's server): the disk's flushes, which vary by far more than sealing
// costs, do not decide the rates being compared.
//   idem-encryption-bench URL [--rounds N] [--seconds S] [--rows N]
#include <soci/soci.h>
#include <idem/database.hpp>
#include <idem/encryption.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

constexpr long long accounts = 100'000;

void prepare(idem::database& db, long long rows) {
    db.migrate();
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << "DROP TABLE IF EXISTS bench_accounts";
        uow.sql() << "CREATE TABLE bench_accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "DELETE FROM idem_records";
    });
    // Accounts, and a retention's worth of records written the way the service writes them.
    db.transact([&](idem::unit_of_work& uow) {
        for (long long i = 0; i < accounts; i += 1000) {
            std::string values;
            for (long long j = i; j < i + 1000; ++j) values += (j == i ? "(" : ",(") + std::to_string(j) + ", 1000000)";
            uow.sql() << "INSERT INTO bench_accounts (id, balance) VALUES " + values;
        }
    });
    for (long long n = 0; n < rows; ++n)
        (void)db.once({"bench.prefill", "p-" + std::to_string(n)}, "fp",
                      [](idem::unit_of_work&) { return std::string(400, 'r'); });
}

// A response of the size an HTTP API answers a payment with.
std::string response_for(long long from, long long to, std::uint64_t n) {
    std::string r = R"({"id":"pay_)" + std::to_string(n) + R"(","from":)" + std::to_string(from) + R"(,"to":)" +
                    std::to_string(to) + R"(,"amount":1,"currency":"EUR","status":"settled","metadata":")";
    r.append(400 - r.size() - 2, 'm');
    return r + "\"}";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: idem-encryption-bench URL [--rounds N] [--seconds S] [--rows N]\n";
        return 2;
    }
    int rounds = 5;
    double seconds = 1;
    long long rows = 20'000;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--rounds") rounds = std::stoi(argv[i + 1]);
        if (flag == "--seconds") seconds = std::stod(argv[i + 1]);
        if (flag == "--rows") rows = std::stoll(argv[i + 1]);
    }
    const auto keys = std::make_shared<const idem::encryption_keys>(
        std::vector<idem::encryption_key>{{.id = "k1", .bytes = std::string(32, '\x5a')}});
    const idem::sqlite_connection_options sqlite{.synchronous = idem::sqlite_synchronous::normal};
    idem::database plain = idem::database::open(argv[1], {.sqlite = sqlite});
    prepare(plain, rows);
    idem::database sealed = idem::database::open(argv[1], {.executor = {.encryption = keys}, .sqlite = sqlite});

    std::mt19937_64 rng(7);
    std::uniform_int_distribution<long long> pick(0, accounts - 1);
    const std::string run_id = std::to_string(std::random_device{}());
    std::uint64_t serial = 0;
    std::vector<std::string> written[2];  // the keys each variant wrote: replayed next
    const auto transfers = [&](idem::database& db, int variant) {
        return [&, variant] {
            return idem::bench::measure(
                [&](std::uint64_t) {
                    long long from = pick(rng), to = pick(rng);
                    if (to < from) std::swap(from, to);
                    const std::string key = run_id + "-" + std::to_string(serial++);
                    const auto e = db.once({"bench.transfer", key}, "fp", [&](idem::unit_of_work& uow) {
                        uow.sql() << "UPDATE bench_accounts SET balance = balance - 1 WHERE id = :f", soci::use(from);
                        uow.sql() << "UPDATE bench_accounts SET balance = balance + 1 WHERE id = :t", soci::use(to);
                        return response_for(from, to, serial);
                    });
                    if (e.status() != idem::execution_status::executed) throw std::logic_error("not executed");
                    written[variant].push_back(key);
                },
                std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
        };
    };
    const idem::bench::paired run = idem::bench::compare(transfers(sealed, 1), transfers(plain, 0), rounds);
    std::cout << "encryption: steady-state transfer, 400-byte result, sealed "
              << static_cast<long long>(run.subject.per_second) << "/s; in the clear "
              << static_cast<long long>(run.baseline.per_second) << "/s; ratio "
              << run.subject.per_second / run.baseline.per_second << '\n';

    const auto replays = [&](idem::database& db, int variant) {
        return [&, variant] {
            const std::vector<std::string>& keys_written = written[variant];
            return idem::bench::measure(
                [&](std::uint64_t n) {
                    const auto e = db.once({"bench.transfer", keys_written[n % keys_written.size()]}, "fp",
                                           [](idem::unit_of_work&) { return std::string(); });
                    if (e.status() != idem::execution_status::replayed) throw std::logic_error("not replayed");
                },
                std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
        };
    };
    const idem::bench::paired replay = idem::bench::compare(replays(sealed, 1), replays(plain, 0), rounds);
    std::cout << "encryption: replay of a 400-byte result, sealed " << static_cast<long long>(replay.subject.per_second)
              << "/s; in the clear " << static_cast<long long>(replay.baseline.per_second) << "/s; ratio "
              << replay.subject.per_second / replay.baseline.per_second << '\n';
    return 0;
}
