// SQLite: the transfer transaction bare and with idem (inside the transaction,
// lease mode, observe), the replay path, and the purge job.
#include <filesystem>
#include <thread>

#include <soci/soci.h>

#include "bench.hpp"
#include "idem/executor.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/store_admin.hpp"
#include "idem/transaction_runner.hpp"
#include "purge_bench.hpp"
#include "transfer_bank.hpp"

namespace idem::bench {
namespace {

using namespace std::chrono_literals;

struct sqlite_setup {
    std::string path;
    std::shared_ptr<sqlite_store> store;
    soci::session session;
    std::unique_ptr<transaction_runner> runner;

    sqlite_setup(const options& o, const std::string& name, sqlite_synchronous sync) {
        path = (std::filesystem::path(o.sqlite_dir) / (name + ".db")).string();
        for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
        const sqlite_connection_options connection{.synchronous = sync};
        store = std::make_shared<sqlite_store>(sqlite_store_options{.path = path, .connection = connection});
        open_sqlite_session(session, path, connection);
        runner = std::make_unique<transaction_runner>(session);
    }
};

const char* name_of(sqlite_synchronous s) {
    return s == sqlite_synchronous::full ? "synchronous=FULL" : "synchronous=NORMAL";
}

}  // namespace

void run_sqlite(const options& o, report& out) {
    for (const auto sync : {sqlite_synchronous::full, sqlite_synchronous::normal}) {
        sqlite_setup db(o, std::string("transfers-") + (sync == sqlite_synchronous::full ? "full" : "normal"), sync);
        transfer_bank bank(db.session);
        executor enforce(db.store);
        executor observe(db.store, {.mode = mode::observe});
        string_codec codec;
        std::uint64_t next = 0;
        const auto key_of = [](std::uint64_t id) { return record_key("bench.transfer", "t-" + std::to_string(id)); };

        const auto bare = [&] {
            return measure([&](std::uint64_t) { db.runner->run([&](unit_of_work&) { bank.transfer(next++); }); },
                           o.span);
        };
        const auto inside = [&](executor& exec) {
            return [&] {
                return measure(
                    [&](std::uint64_t) {
                        const std::uint64_t id = next++;
                        const record_key key = key_of(id);
                        db.runner->run([&](unit_of_work& tx) {
                            require_executed(idem::detail::executor_access::execute_in(
                                exec, tx, key, "fp", {},
                                [&] {
                                    bank.transfer(id);
                                    return std::string("ok");
                                },
                                codec));
                        });
                    },
                    o.span);
            };
        };
        const auto lease = [&] {
            return measure(
                [&](std::uint64_t) {
                    const std::uint64_t id = next++;
                    const record_key key = key_of(id);
                    require_executed(enforce.execute(
                        key, "fp", {},
                        [&] {
                            db.runner->run([&](unit_of_work&) { bank.transfer(id); });
                            return std::string("ok");
                        },
                        codec));
                },
                o.span);
        };
        const std::string where = name_of(sync);
        const std::string bare_name = "bare transfer (BEGIN IMMEDIATE, 2 UPDATE, INSERT, COMMIT)";
        out.add({.group = "sqlite",
                 .name = "enforce inside the transaction, " + where,
                 .subject = "idem",
                 .baseline = bare_name,
                 .result = compare(inside(enforce), bare, o.rounds),
                 .unit = "transfers/s"});
        out.add({.group = "sqlite",
                 .name = "lease mode (detached reserve, complete), " + where,
                 .subject = "idem",
                 .baseline = bare_name,
                 .result = compare(lease, bare, o.rounds),
                 .unit = "transfers/s"});
        out.add({.group = "sqlite",
                 .name = "observe inside the transaction, " + where,
                 .subject = "idem",
                 .baseline = bare_name,
                 .result = compare(inside(observe), bare, o.rounds),
                 .unit = "transfers/s"});
    }

    // Replay: a retry answered from the store against a bare primary-key SELECT.
    sqlite_setup db(o, "replay", sqlite_synchronous::full);
    transfer_bank bank(db.session);
    executor exec(db.store);
    string_codec codec;
    const record_key key("bench.transfer", "replayed");
    (void)exec.execute(
        key, "fp", {}, [] { return std::string(R"({"id":"t-1","amount":100})"); }, codec);
    long long balance = 0;
    soci::statement select =
        (db.session.prepare << "SELECT balance FROM accounts WHERE id = 'alice'", soci::into(balance));
    const auto replay = [&] {
        return measure(
            [&](std::uint64_t) {
                if (exec.execute(
                            key, "fp", {}, [] { return std::string(); }, codec)
                        .status() != execution_status::replayed)
                    throw std::logic_error("not a replay");
            },
            o.span);
    };
    const auto bare_select = [&] { return measure([&](std::uint64_t) { select.execute(true); }, o.span); };
    out.add({.group = "sqlite",
             .name = "replay of a stored result",
             .subject = "idem replay (executor, detached view)",
             .baseline = "SELECT by primary key, prepared",
             .result = compare(replay, bare_select, o.rounds),
             .unit = "ops/s"});

    // Purge: a million expired rows, written straight into the table.
    constexpr std::size_t expired_rows = 1'000'000;
    sqlite_setup purge(o, "purge", sqlite_synchronous::normal);
    purge.runner->run([&](unit_of_work& tx) {
        tx.sql() << "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows) "
                    "INSERT INTO idem_records (key_hash, namespace, fingerprint, token, state, payload, "
                    "expires_at, updated_at) SELECT randomblob(16), 'bench.purge', 'fp', "
                    "'token', 1, x'', 1000 + i % 1000, 0 FROM n",
            soci::use(expired_rows);
    });
    measure_purge(*purge.store, expired_rows, "sqlite", out);
}

}  // namespace idem::bench
