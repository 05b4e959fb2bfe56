// Several writer threads on one SQLite file in one process, at synchronous FULL
// and NORMAL: how they wait for SQLite's one write lock. At steady state
// (100,000 accounts at random, the ledger and the record table prefilled), in
// alternating rounds, each thread with a connection of its own:
// - SQLite's busy handler: BEGIN IMMEDIATE on a connection with
//   sqlite3_busy_timeout, which sleeps 1, 2, 5, 10... ms between attempts;
// - idem's polling handler: BEGIN IMMEDIATE sent directly on a connection idem
//   configured (20 us backing off to 1 ms), how idem's writers waited before
//   the line;
// - idem's line: the same statements in a transaction_runner, whose BEGIN waits
//   in the process's line for the file;
// - db.once: the transfer with its record through idem::database.
// Transfers per second (all threads) and fdatasync calls per transfer.
//   idem-sqlite-writers-bench [--dir D] [--rows N] [--seconds S] [--rounds N] [--threads 1,4,16]
#include <soci/soci.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <idem/database.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/transaction_runner.hpp>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sqlite_api.hpp"
#include "sqlite_transfer.hpp"
#include "steady_state.hpp"

// Every fdatasync SQLite makes, counted: this executable's definition stands in
// for the C library's in the shared libraries it loads.
namespace {
std::atomic<std::uint64_t> syncs{0};
}
extern "C" int fdatasync(int fd) {
    syncs.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(::syscall(SYS_fdatasync, fd));
}
extern "C" int fsync(int fd) {
    syncs.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace {

using namespace idem::bench;
using namespace std::chrono_literals;

const char* pragma_of(idem::sqlite_synchronous level) {
    return level == idem::sqlite_synchronous::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL";
}

void prefill(const std::string& path, std::size_t rows) {
    idem::database db = idem::database::open("sqlite:" + path);
    db.migrate();
    soci::session s;
    idem::open_sqlite_session(s, path);
    sqlite3* h = native(s);
    const std::string n = std::to_string(rows);
    const std::string now = "(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))";
    exec(h, "PRAGMA cache_size = -524288");
    exec(h, "BEGIN");
    sqlite_transfer::create_tables(h, rows);
    exec(h, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " + n +
                ") INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, expires_at, "
                "updated_at) SELECT randomblob(16), 'bench.transfer', 'fp', '-', 1, 'ok', " +
                now + " + i * 86400000 / " + n + ", " + now + " - 86400000 + i * 86400000 / " + n + " FROM n");
    exec(h, "COMMIT");
    exec(h, "ANALYZE");
    exec(h, "PRAGMA wal_checkpoint(TRUNCATE)");
}

// One thread's connection and its statements.
struct writer {
    soci::session session;
    sqlite3* raw = nullptr;  // set for SQLite's own busy handler
    std::unique_ptr<sqlite_transfer> transfer;
    std::unique_ptr<idem::transaction_runner> runner;
    ~writer() {
        transfer.reset();
        if (raw != nullptr) sqlite_api::sqlite3_close_v2(raw);
    }
};

struct measured {
    std::string name;
    std::function<double()> run;
    std::uint64_t transfers = 0, syncs = 0;
};

}  // namespace

int main(int argc, char** argv) {
    std::string dir = std::filesystem::temp_directory_path().string();
    std::size_t rows = 1'000'000;
    auto span = 2000ms;
    int rounds = 3;
    std::vector<int> thread_counts{1, 4, 16};
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--dir") {
            dir = value;
        } else if (flag == "--rows") {
            rows = std::stoull(value);
        } else if (flag == "--seconds") {
            span = std::chrono::milliseconds(static_cast<long>(std::stod(value) * 1000));
        } else if (flag == "--rounds") {
            rounds = std::stoi(value);
        } else if (flag == "--threads") {
            thread_counts.clear();
            for (std::size_t at = 0; at < value.size();) {
                const std::size_t comma = std::min(value.find(',', at), value.size());
                thread_counts.push_back(std::stoi(value.substr(at, comma - at)));
                at = comma + 1;
            }
        } else {
            std::cerr << "unknown flag " << flag << "\n";
            return 2;
        }
    }
    const std::string path = (std::filesystem::path(dir) / "idem-writers-bench.db").string();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    prefill(path, rows);
    std::atomic<std::uint64_t> next_id{rows + 1};

    std::printf(
        "| synchronous | writer threads | SQLite's busy handler | idem's polling handler | idem's line | "
        "db.once | line / SQLite's | line / polling | fdatasync per transfer (SQLite's, polling, line, "
        "once) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (const auto level : {idem::sqlite_synchronous::full, idem::sqlite_synchronous::normal}) {
        for (const int threads : thread_counts) {
            const auto n = static_cast<std::size_t>(threads);
            std::vector<writer> bare(n), polling(n), line(n);
            for (std::size_t t = 0; t < n; ++t) {
                sqlite_api::sqlite3_open_v2(path.c_str(), &bare[t].raw, SQLITE_OPEN_READWRITE, nullptr);
                sqlite_api::sqlite3_busy_timeout(bare[t].raw, 5000);
                exec(bare[t].raw, pragma_of(level));
                bare[t].transfer = std::make_unique<sqlite_transfer>(bare[t].raw);
                for (writer* w : {&polling[t], &line[t]}) {
                    idem::open_sqlite_session(w->session, path, {.synchronous = level});
                    w->transfer = std::make_unique<sqlite_transfer>(native(w->session));
                    w->runner = std::make_unique<idem::transaction_runner>(w->session);
                }
            }
            idem::database db = idem::database::open("sqlite:" + path,
                                                     {.pool_size = n, .attempts = 1, .sqlite = {.synchronous = level}});
            // db.once's statements, prepared once per business connection.
            std::mutex prepared_mutex;
            std::map<sqlite3*, std::unique_ptr<sqlite_transfer>> prepared;
            auto transfer_on = [&](soci::session& s) -> sqlite_transfer& {
                const std::lock_guard lock(prepared_mutex);
                auto& slot = prepared[native(s)];
                if (!slot) slot = std::make_unique<sqlite_transfer>(native(s));
                return *slot;
            };
            std::vector<measured> subjects;
            auto add = [&](std::string name, std::function<void(std::size_t)> op) {
                subjects.push_back({std::move(name), {}});
                measured& m = subjects.back();
                m.run = [&, op, &m = m] {
                    std::atomic<std::uint64_t> done{0};
                    const std::uint64_t before = syncs.load();
                    const double rate = on_clients(threads, span, [&](std::size_t c, std::uint64_t) {
                        op(c);
                        done.fetch_add(1, std::memory_order_relaxed);
                    });
                    m.syncs += syncs.load() - before;
                    m.transfers += done.load();
                    return rate;
                };
            };
            subjects.reserve(4);
            add("sqlite", [&](std::size_t c) { bare[c].transfer->bare(next_id++); });
            add("polling", [&](std::size_t c) { polling[c].transfer->bare(next_id++); });
            add("line", [&](std::size_t c) {
                line[c].runner->run([&](idem::unit_of_work&) { line[c].transfer->transfer(next_id++); });
            });
            add("once", [&](std::size_t) {
                const std::uint64_t id = next_id++;
                (void)db.once(transfer_key(id), "fp", [&](idem::unit_of_work& uow) {
                    transfer_on(uow.sql()).transfer(id);
                    return std::string("ok");
                });
            });
            std::vector<std::function<double()>> runs;
            for (auto& m : subjects) runs.push_back(m.run);
            const std::vector<double> rates = compare_all(runs, rounds);
            auto per = [&](const measured& m) {
                return m.transfers == 0 ? 0.0 : static_cast<double>(m.syncs) / static_cast<double>(m.transfers);
            };
            std::printf("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f, %.2f, %.2f, %.2f |\n",
                        level == idem::sqlite_synchronous::full ? "FULL" : "NORMAL", threads, rates[0], rates[1],
                        rates[2], rates[3], rates[2] / rates[0], rates[2] / rates[1], per(subjects[0]),
                        per(subjects[1]), per(subjects[2]), per(subjects[3]));
            std::fflush(stdout);
            prepared.clear();
        }
    }
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    return 0;
}
