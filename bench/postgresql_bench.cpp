// PostgreSQL: the transfer transaction bare and with idem (the fast path, the
// plain form inside the transaction, lease mode, observe), the replay path,
// the purge job, and N client connections for the pgbench comparison.
#include <atomic>
#include <barrier>
#include <thread>

#include <libpq-fe.h>
#include <soci/postgresql/soci-postgresql.h>
#include <soci/soci.h>

#include "bench.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/postgresql_store.hpp"
#include "idem/transaction_runner.hpp"
#include "purge_bench.hpp"
#include "transfer_bank.hpp"

namespace idem::bench {
namespace {

using namespace std::chrono_literals;

struct connection {
    soci::session session;
    std::unique_ptr<transaction_runner> runner;

    explicit connection(const std::string& conninfo) {
        open_postgresql_session(session, conninfo);
        runner = std::make_unique<transaction_runner>(session);
    }
};

// Keys of this run only: records of earlier runs stay in the table, and a key
// met again would be a replay, not a transfer.
// The transfer's own statements, sent as pgbench sends them: prepared, through
// libpq on the session's connection. SOCI costs its user tens of microseconds a
// statement; that is not the library's cost, and pgbench does not pay it.
class pq_transfer_bank {
public:
    explicit pq_transfer_bank(soci::session& s, bool reset = true)
        : conn_(static_cast<soci::postgresql_session_backend*>(s.get_backend())->conn_) {
        if (reset) transfer_bank{s};  // creates the tables and the two accounts
        prepare("bench_debit", "UPDATE accounts SET balance = balance - 1 WHERE id = 'alice'", 0);
        prepare("bench_credit", "UPDATE accounts SET balance = balance + 1 WHERE id = 'bob'", 0);
        prepare("bench_ledger", "INSERT INTO ledger (transfer_id, amount) VALUES ($1::bigint, 1)", 1);
    }

    void transfer(std::uint64_t id) {
        const std::string text = std::to_string(id);
        const char* value = text.c_str();
        run("bench_debit", 0, nullptr);
        run("bench_credit", 0, nullptr);
        run("bench_ledger", 1, &value);
    }

private:
    void prepare(const char* name, const char* sql, int params) {
        check(PQprepare(conn_, name, sql, params, nullptr), PGRES_COMMAND_OK);
    }
    void run(const char* name, int params, const char* const* values) {
        check(PQexecPrepared(conn_, name, params, values, nullptr, nullptr, 0), PGRES_COMMAND_OK);
    }
    static void check(PGresult* r, ExecStatusType wanted) {
        const bool ok = PQresultStatus(r) == wanted;
        PQclear(r);
        if (!ok) throw std::runtime_error("a benchmark statement failed");
    }

    PGconn* conn_;
};

record_key key_of(std::uint64_t id) {
    static const std::string run = detail::new_token().substr(0, 12);
    return record_key("bench.transfer", run + "-" + std::to_string(id));
}

// Transfer ids never repeat within a run, whichever thread or scenario draws them.
std::atomic<std::uint64_t> next_id{1};

}  // namespace

void run_postgresql(const options& o, report& out) {
    auto store = std::make_shared<postgresql_store>(postgresql_store_options{.connection = o.postgresql});
    connection db(o.postgresql);
    pq_transfer_bank bank(db.session);
    executor enforce(store);
    executor observe(store, {.mode = mode::observe});
    string_codec codec;
    const auto op_result = std::string("ok");

    const auto bare = [&] {
        return measure([&](std::uint64_t) { db.runner->run([&](unit_of_work&) { bank.transfer(next_id++); }); },
                       o.span);
    };
    const auto fast = [&] {
        return measure(
            [&](std::uint64_t) {
                const std::uint64_t id = next_id++;
                require_executed(idem::detail::execute_in_transaction(
                    enforce, *db.runner, key_of(id), "fp", {},
                    [&](unit_of_work&) {
                        bank.transfer(id);
                        return op_result;
                    },
                    codec));
            },
            o.span);
    };
    const auto inside = [&](executor& exec) {
        return [&] {
            return measure(
                [&](std::uint64_t) {
                    const std::uint64_t id = next_id++;
                    db.runner->run([&](unit_of_work& tx) {
                        require_executed(idem::detail::executor_access::execute_in(
                            exec, tx, key_of(id), "fp", {},
                            [&] {
                                bank.transfer(id);
                                return op_result;
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
                const std::uint64_t id = next_id++;
                require_executed(enforce.execute(
                    key_of(id), "fp", {},
                    [&] {
                        db.runner->run([&](unit_of_work&) { bank.transfer(id); });
                        return op_result;
                    },
                    codec));
            },
            o.span);
    };
    const std::string bare_name = "bare transfer (BEGIN, 2 UPDATE, INSERT, COMMIT), 1 connection";
    out.add({.group = "postgresql",
             .name = "enforce, idem::detail::execute_in_transaction (the fast path)",
             .subject = "idem",
             .baseline = bare_name,
             .result = compare(fast, bare, o.rounds),
             .unit = "transfers/s"});
    out.add({.group = "postgresql",
             .name = "enforce, runner.run + idem::detail::executor_access::execute_in(executor, tx)",
             .subject = "idem",
             .baseline = bare_name,
             .result = compare(inside(enforce), bare, o.rounds),
             .unit = "transfers/s"});
    out.add({.group = "postgresql",
             .name = "lease mode (detached reserve, complete)",
             .subject = "idem",
             .baseline = bare_name,
             .result = compare(lease, bare, o.rounds),
             .unit = "transfers/s"});
    out.add({.group = "postgresql",
             .name = "observe inside the transaction",
             .subject = "idem",
             .baseline = bare_name,
             .result = compare(inside(observe), bare, o.rounds),
             .unit = "transfers/s"});

    // Replay: a retry answered from the store against a bare primary-key SELECT.
    const record_key replayed("bench.transfer", "replayed");
    (void)enforce.execute(
        replayed, "fp", {}, [] { return std::string(R"({"id":"t-1","amount":100})"); }, codec);
    long long balance = 0;
    soci::statement select =
        (db.session.prepare << "SELECT balance FROM accounts WHERE id = 'alice'", soci::into(balance));
    const auto replay = [&] {
        return measure(
            [&](std::uint64_t) {
                if (enforce
                        .execute(
                            replayed, "fp", {}, [] { return std::string(); }, codec)
                        .status() != execution_status::replayed)
                    throw std::logic_error("not a replay");
            },
            o.span);
    };
    const auto bare_select = [&] { return measure([&](std::uint64_t) { select.execute(true); }, o.span); };
    out.add({.group = "postgresql",
             .name = "replay of a stored result",
             .subject = "idem replay (executor, detached view)",
             .baseline = "SELECT by primary key, prepared",
             .result = compare(replay, bare_select, o.rounds),
             .unit = "ops/s"});
    // The same retry through execute_in_transaction: the lookup with BEGIN, then
    // COMMIT; with reserve_first, the reserve with BEGIN, a locked read, COMMIT.
    for (const bool reserve_first : {false, true}) {
        const auto replay_in_transaction = [&] {
            return measure(
                [&](std::uint64_t) {
                    if (idem::detail::execute_in_transaction(
                            enforce, *db.runner, replayed, "fp", {.reserve_first = reserve_first},
                            [](unit_of_work&) { return std::string(); }, codec)
                            .status() != execution_status::replayed)
                        throw std::logic_error("not a replay");
                },
                o.span);
        };
        out.add({.group = "postgresql",
                 .name = reserve_first ? "replay of a stored result, execute_in_transaction with reserve_first"
                                       : "replay of a stored result, execute_in_transaction",
                 .subject = "idem replay",
                 .baseline = "SELECT by primary key, prepared",
                 .result = compare(replay_in_transaction, bare_select, o.rounds),
                 .unit = "ops/s"});
    }

    // Purge: a million expired rows, written straight into the table.
    constexpr std::size_t expired_rows = 1'000'000;
    db.session
        << "INSERT INTO idem_records (key_hash, namespace, token, fingerprint, payload, completed, "
           "created_at, expires_at) SELECT substring(sha256(int8send(i)) FROM 1 FOR 16), 'bench.purge', '\\x01', "
           "'\\x02', '\\x', true, now() - interval '2 days', now() - interval '1 day' "
           "FROM generate_series(1, :rows) AS i",
        soci::use(static_cast<long long>(expired_rows));
    db.session << "VACUUM ANALYZE idem_records";
    db.session << "CHECKPOINT";  // the bulk insert's writes are flushed before anything is timed
    measure_purge(*store, expired_rows, "postgresql", out);
}

void run_postgresql_clients(const options& o, int clients, report& out) {
    auto store = std::make_shared<postgresql_store>(
        postgresql_store_options{.connection = o.postgresql, .pool_size = static_cast<std::size_t>(clients)});
    executor exec(store);
    std::vector<std::unique_ptr<connection>> connections;
    std::vector<std::unique_ptr<pq_transfer_bank>> banks;
    for (int c = 0; c < clients; ++c) connections.push_back(std::make_unique<connection>(o.postgresql));
    banks.push_back(std::make_unique<pq_transfer_bank>(connections[0]->session));  // creates and resets the tables
    for (int c = 1; c < clients; ++c)
        banks.push_back(std::make_unique<pq_transfer_bank>(connections[static_cast<std::size_t>(c)]->session, false));

    std::vector<double> rates(static_cast<std::size_t>(clients));
    std::barrier start(clients);
    {
        std::vector<std::jthread> threads;
        for (int c = 0; c < clients; ++c) {
            threads.emplace_back([&, c] {
                const auto i = static_cast<std::size_t>(c);
                start.arrive_and_wait();
                rates[i] = measure(
                    [&](std::uint64_t) {
                        const std::uint64_t id = next_id++;
                        require_executed(idem::detail::execute_in_transaction(
                            exec, *connections[i]->runner, key_of(id), "fp", {},
                            [&](unit_of_work&) {
                                banks[i]->transfer(id);
                                return std::string("ok");
                            },
                            string_codec{}));
                    },
                    o.span);
            });
        }
    }
    double total = 0;
    for (double r : rates) total += r;
    out.add({.group = "pgbench",
             .name = "idem fast path, " + std::to_string(clients) + " clients",
             .subject = "idem",
             .baseline = "",
             .result = {{total, 1e9 / total}, {total, 1e9 / total}},
             .unit = "transfers/s"});
}

}  // namespace idem::bench
