// Mapped objects at steady state: the transfer of sqlite_steady.cpp and
// postgresql_steady.cpp (two of 100,000 accounts at random and a ledger line,
// 1,000,000 records and ledger lines prefilled), each in idem's transaction
// (execute_in_transaction), through the mapping against the same statements
// written by hand with SOCI on the same session, in alternating rounds. With
// a version column: two SELECTs, two UPDATEs WHERE version = the one read, the
// ledger INSERT. Without one: the SELECTs FOR UPDATE on PostgreSQL (plain on
// SQLite) and two UPDATEs. SQLite at synchronous FULL and NORMAL, one writer;
// PostgreSQL with synchronous_commit=on at 1 and 8 clients.
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>

#include <soci/soci.h>

#include "bench.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/error.hpp"
#include "idem/executor.hpp"
#include "idem/mapping.hpp"
#include "idem/transaction_runner.hpp"
#include "steady_state.hpp"
#include "steady_tables.hpp"
#ifdef IDEM_BENCH_SQLITE
#include "idem/sqlite_store.hpp"
#endif
#ifdef IDEM_BENCH_POSTGRESQL
#include "idem/postgresql_store.hpp"
#endif

namespace idem::bench {

struct versioned_account {
    long long id = 0;
    long long balance = 0;
    long long version = 0;
};

// The same rows without their version: read FOR UPDATE on PostgreSQL.
struct locked_account {
    long long id = 0;
    long long balance = 0;
};

struct ledger_line {
    long long transfer_id = 0;
    long long amount = 0;
};

}  // namespace idem::bench

template <>
struct idem::mapping<idem::bench::versioned_account> {
    static constexpr auto table = "bench_accounts";
    static constexpr auto columns =
        std::tuple(key("id", &bench::versioned_account::id), column("balance", &bench::versioned_account::balance),
                   version("version", &bench::versioned_account::version));
};

template <>
struct idem::mapping<idem::bench::locked_account> {
    static constexpr auto table = "bench_accounts";
    static constexpr auto columns =
        std::tuple(key("id", &bench::locked_account::id), column("balance", &bench::locked_account::balance));
};

template <>
struct idem::mapping<idem::bench::ledger_line> {
    static constexpr auto table = "bench_ledger";
    static constexpr auto columns =
        std::tuple(key("transfer_id", &bench::ledger_line::transfer_id), column("amount", &bench::ledger_line::amount));
};

namespace idem::bench {
namespace {

// What the mapping sends, written by hand: statements prepared once on the session.
class by_hand {
public:
    by_hand(soci::session& s, bool versioned, const std::string& lock)
        : load_(versioned ? (s.prepare << "SELECT balance, version FROM bench_accounts WHERE id = :id", soci::use(id_),
                             soci::into(balance_), soci::into(version_))
                          : (s.prepare << "SELECT balance FROM bench_accounts WHERE id = :id" + lock, soci::use(id_),
                             soci::into(balance_))),
          update_(versioned ? (s.prepare << "UPDATE bench_accounts SET balance = :b, version = :nv "
                                            "WHERE id = :id AND version = :v",
                               soci::use(new_balance_), soci::use(new_version_), soci::use(id_), soci::use(version_))
                            : (s.prepare << "UPDATE bench_accounts SET balance = :b WHERE id = :id",
                               soci::use(new_balance_), soci::use(id_))),
          ledger_((s.prepare << "INSERT INTO bench_ledger (transfer_id, amount) VALUES (:t, 1)",
                   soci::use(transfer_id_))) {}

    void transfer(std::int64_t from, std::int64_t to, std::uint64_t id) {
        if (from == to) {  // one account: a read, no change
            load(from);
        } else {
            const auto [from_balance, from_version] = load(from);
            const auto [to_balance, to_version] = load(to);
            write(from, from_balance - 1, from_version);
            write(to, to_balance + 1, to_version);
        }
        transfer_id_ = static_cast<long long>(id);
        ledger_.execute(true);
    }

private:
    std::pair<long long, long long> load(std::int64_t id) {
        id_ = id;
        if (!load_.execute(true)) throw std::logic_error("bench: no such account");
        while (load_.fetch()) {  // to the end, as the mapping does
        }
        return {balance_, version_};
    }

    void write(std::int64_t id, long long balance, long long version) {
        id_ = id;
        new_balance_ = balance;
        new_version_ = version + 1;
        version_ = version;
        update_.execute(true);
        // Another client wrote the row since it was read (8 clients): run the transfer again, as the mapping does.
        if (update_.get_affected_rows() != 1) throw stale_write("bench account", "bench_accounts");
    }

    long long id_ = 0, balance_ = 0, version_ = 0, new_balance_ = 0, new_version_ = 0, transfer_id_ = 0;
    soci::statement load_, update_, ledger_;
};

template <class Account>
void through_mapping(unit_of_work& uow, std::int64_t from, std::int64_t to, std::uint64_t id) {
    Account& source = uow.get<Account>(from);
    Account& target = uow.get<Account>(to);  // the same object when from == to
    source.balance -= 1;
    target.balance += 1;
    uow.add(ledger_line{static_cast<long long>(id), 1});
}

// One client: a session, its runner, and the hand-written statements on it.
struct client {
    soci::session session;
    std::unique_ptr<transaction_runner> runner;
    std::unique_ptr<by_hand> versioned, locked;
    std::mt19937_64 rng;

    client(const std::function<void(soci::session&)>& open, const std::string& lock, std::uint64_t seed) : rng(seed) {
        open(session);
        runner = std::make_unique<transaction_runner>(
            session, transaction_options{.isolation = isolation_level::read_committed});
        versioned = std::make_unique<by_hand>(session, true, lock);
        locked = std::make_unique<by_hand>(session, false, lock);
    }
};

std::atomic<std::uint64_t> next_transfer{0};

// The four variants, each one transfer in idem's transaction.
enum class variant { hand_versioned, mapping_versioned, hand_locked, mapping_locked };

void transfer_once(executor& exec, client& c, variant v, std::uint64_t id, std::int64_t from, std::int64_t to) {
    require_executed(detail::execute_in_transaction(
        exec, *c.runner, transfer_key(id), "fp", {},
        [&](unit_of_work& uow) {
            switch (v) {
                case variant::hand_versioned:
                    (void)uow.sql();  // the transaction's BEGIN, if it is still held
                    c.versioned->transfer(from, to, id);
                    break;
                case variant::mapping_versioned: through_mapping<versioned_account>(uow, from, to, id); break;
                case variant::hand_locked:
                    (void)uow.sql();
                    c.locked->transfer(from, to, id);
                    break;
                case variant::mapping_locked: through_mapping<locked_account>(uow, from, to, id); break;
            }
            return std::string("ok");
        },
        string_codec{}));
}

void transfer(executor& exec, client& c, variant v) {
    const std::uint64_t id = next_transfer++;
    const auto [from, to] = account_pair(c.rng);
    // A stale write or a deadlock between clients rolls back; the transfer runs again, by hand and mapped alike.
    for (;;) try {
            transfer_once(exec, c, v, id, from, to);
            return;
        } catch (const store_error& e) {
            if (!e.is_transient()) throw;
        }
}

void add_rows(report& out, const std::string& config, const std::vector<double>& rates, const options& o) {
    const auto row = [&](std::size_t subject, std::size_t baseline, const char* name, const char* by) {
        out.add({.group = "mapping-steady",
                 .name = config,
                 .subject = name,
                 .baseline = by,
                 .result = {{rates[subject], 1e9 / rates[subject]}, {rates[baseline], 1e9 / rates[baseline]}},
                 .unit = "transfers/s",
                 .note = std::to_string(o.steady_rows) + " rows"});
    };
    row(1, 0, "mapping, version column", "by hand, version column");
    row(3, 2, "mapping, no version column", "by hand, no version column");
}

std::vector<std::function<double()>> subjects_for(executor& exec, std::vector<std::unique_ptr<client>>& clients,
                                                  const options& o) {
    std::vector<std::function<double()>> subjects;
    for (const variant v :
         {variant::hand_versioned, variant::mapping_versioned, variant::hand_locked, variant::mapping_locked})
        subjects.emplace_back([&, v] {
            return on_clients(static_cast<int>(clients.size()), o.span,
                              [&](std::size_t c, std::uint64_t) { transfer(exec, *clients[c], v); });
        });
    return subjects;
}

}  // namespace

#ifdef IDEM_BENCH_SQLITE
void run_sqlite_mapping(const options& o, report& out) {
    const std::string path = (std::filesystem::path(o.sqlite_dir) / "mapping-steady.db").string();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    {
        (void)sqlite_store(sqlite_store_options{.path = path});  // creates idem_records
        soci::session s;
        open_sqlite_session(s, path, {.synchronous = sqlite_synchronous::off});
        prefill_sqlite_steady(s, o.steady_rows);
        s << "ALTER TABLE bench_accounts ADD COLUMN version BIGINT NOT NULL DEFAULT 0";
    }
    next_transfer = o.steady_rows + 1;
    for (const auto sync : {sqlite_synchronous::full, sqlite_synchronous::normal}) {
        auto store =
            std::make_shared<sqlite_store>(sqlite_store_options{.path = path, .connection = {.synchronous = sync}});
        executor exec(store);
        std::vector<std::unique_ptr<client>> clients;
        clients.push_back(std::make_unique<client>(
            [&](soci::session& s) { open_sqlite_session(s, path, {.synchronous = sync}); }, "", 0x5eed));
        const std::vector<double> rates = compare_all(subjects_for(exec, clients, o), o.rounds);
        add_rows(out,
                 std::string("SQLite WAL, synchronous=") + (sync == sqlite_synchronous::full ? "FULL" : "NORMAL") +
                     ", 1 client",
                 rates, o);
    }
}
#endif

#ifdef IDEM_BENCH_POSTGRESQL
void run_postgresql_mapping(const options& o, report& out) {
    {
        (void)postgresql_store(postgresql_store_options{.connection = o.postgresql});  // creates idem_records
        soci::session s;
        open_postgresql_session(s, o.postgresql);
        prefill_postgresql_steady(s, o.steady_rows);
        s << "ALTER TABLE bench_accounts ADD COLUMN version bigint NOT NULL DEFAULT 0";
        s << "VACUUM ANALYZE bench_accounts";
        std::string database;
        s << "SELECT current_database()", soci::into(database);
        s << "ALTER DATABASE \"" + database + "\" SET synchronous_commit = on";
    }
    next_transfer = o.steady_rows + 1;
    for (const int count : {1, 8}) {
        auto store = std::make_shared<postgresql_store>(
            postgresql_store_options{.connection = o.postgresql, .pool_size = static_cast<std::size_t>(count)});
        executor exec(store);
        std::vector<std::unique_ptr<client>> clients;
        for (int c = 0; c < count; ++c)
            clients.push_back(
                std::make_unique<client>([&](soci::session& s) { open_postgresql_session(s, o.postgresql); },
                                         " FOR UPDATE", 0x5eed + static_cast<std::uint64_t>(c)));
        const std::vector<double> rates = compare_all(subjects_for(exec, clients, o), o.rounds);
        add_rows(out,
                 "PostgreSQL synchronous_commit=on, " + std::to_string(count) + (count == 1 ? " client" : " clients"),
                 rates, o);
    }
    soci::session s;
    open_postgresql_session(s, o.postgresql);
    std::string database;
    s << "SELECT current_database()", soci::into(database);
    s << "ALTER DATABASE \"" + database + "\" RESET synchronous_commit";
}
#endif

}  // namespace idem::bench
