// Move money between two accounts in one transaction with an idempotent
// transfer command, on SQLite or PostgreSQL: the same key twice moves the money
// once; a transfer that fails rolls back, leaves no record, and can be retried
// with the same key. Accounts and transfers are mapped objects: the unit of work
// loads them, tracks what changed and writes it before the record, an account
// WHERE its version is the one read; once() returns the transfer, and a replay
// reads the committed row back through the same mapping.
//
//   idem-transfer [--db URL]     sqlite:PATH or PATH.db (default: a temporary file, removed at exit),
//                                postgresql://... or "host=... dbname=..."
#include <soci/soci.h>
#include <idem/database.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>

namespace bank {

// readme:begin database-row
struct account {
    std::string id;
    long long balance = 0;  // cents
    long long version = 0;  // moves on with every write: a concurrent one is a stale write, run again
};

struct transfer {
    std::string id;  // the business row's own id, new for every run (see "Observe-safe writes")
    std::string from, to;
    long long amount = 0;  // cents
};
// readme:end database-row

struct insufficient_funds : std::runtime_error {
    insufficient_funds() : std::runtime_error("insufficient funds") {}
};

std::string new_id() {
    thread_local std::mt19937_64 random{std::random_device{}()};
    return "tr_" + std::to_string(random());
}

}  // namespace bank

// readme:begin database-mapping
// One declaration per type, and nothing else: the table, the key, the columns.
// It is SOCI's mapping too (soci::use(t), soci::into(t)), and what lets once()
// return a transfer: the record keeps its id, and a replay reads the row back.
template <>
struct idem::mapping<bank::account> {  // in here, key, column and version need no idem::
    static constexpr auto table = "accounts";
    static constexpr auto columns =
        std::tuple(key("id", &bank::account::id), column("balance", &bank::account::balance),
                   version("version", &bank::account::version));
};

template <>
struct idem::mapping<bank::transfer> {
    static constexpr auto table = "transfers";
    static constexpr auto columns =
        std::tuple(key("id", &bank::transfer::id), column("from_account", &bank::transfer::from),
                   column("to_account", &bank::transfer::to), column("amount", &bank::transfer::amount));
};
// readme:end database-mapping

namespace bank {

// readme:begin database-transfer
// Debits `from`, credits `to`, writes the transfer row and the idempotency record
// in ONE transaction: all of it commits, or none of it does. A retry with the same
// key returns the first run's transfer without moving the money again.
transfer move_money(idem::database& db, const std::string& key, transfer t) {
    const idem::record_key record{"bank.transfer", idem::scope::client("teller"), key};
    const std::string fingerprint = t.from + ">" + t.to + ":" + std::to_string(t.amount);
    auto e = db.once(record, fingerprint, [&](idem::unit_of_work& uow) {
        account& from = uow.get<account>(t.from);  // read once per unit of work, then tracked
        account& to = uow.get<account>(t.to);
        if (from.balance < t.amount) throw insufficient_funds();  // rolls back: no money moved, no record
        from.balance -= t.amount;  // written when the work returns: UPDATE ... WHERE version = the one read
        to.balance += t.amount;
        t.id = new_id();
        return uow.add(t);  // INSERTed with them, before the record
    });
    if (!e.has_value()) throw std::invalid_argument("this key was used for another transfer");
    return e.value();  // executed now, or the first run's transfer, read back
}
// readme:end database-transfer

// readme:begin database-lease
// An email has no transaction to join: lease mode reserves the key on the store's
// own connection first, sends, then stores the result (db.executor() does the rest).
void email_receipt(idem::database& db, const std::string& key, const std::string& receipt) {
    const idem::record_key record{"bank.receipt-email", idem::scope::client("teller"), key};
    auto e = db.executor().execute(
        record, receipt, {},
        [&] {
            std::cout << "  email: " << receipt << "\n";  // the side effect, outside any transaction
            return std::string("sent");
        },
        idem::string_codec{});
    if (e.status() == idem::execution_status::replayed) std::cout << "  email: already sent\n";
}
// readme:end database-lease

long long balance(idem::database& db, const std::string& account) {
    return db.read([&](soci::session& sql) {
        long long b = 0;
        sql << "SELECT balance FROM accounts WHERE id = :id", soci::use(account), soci::into(b);
        return b;
    });
}

std::string describe(const transfer& t) {
    return "moved " + std::to_string(t.amount) + " from " + t.from + " to " + t.to + " (" + t.id + ")";
}

// `prefix` keeps the keys of runs that share a database apart.
int run(const std::string& url, const std::string& prefix) {
    // readme:begin database-open
    idem::database db = idem::database::open(url, {.pool_size = 4});
    db.migrate();                // idem's schema; safe to repeat
    db.create_table<account>();  // for the example: a service's tables are its own migrations
    db.create_table<transfer>();
    // readme:end database-open
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "INSERT INTO accounts (id, balance, version) VALUES ('alice', 100, 0), ('bob', 0, 0)"
                     " ON CONFLICT (id) DO UPDATE SET balance = excluded.balance, version = accounts.version + 1";
    });
    auto show = [&](const char* when) {
        std::cout << when << ": alice " << balance(db, "alice") << ", bob " << balance(db, "bob") << "\n";
    };
    show("start");

    const transfer first = move_money(db, prefix + "transfer-1", {"", "alice", "bob", 30});
    const transfer again = move_money(db, prefix + "transfer-1", {"", "alice", "bob", 30});  // a retry
    std::cout << "transfer-1: " << describe(first) << "\ntransfer-1 again: " << describe(again) << " (replayed)\n";
    email_receipt(db, prefix + "transfer-1", describe(first));
    email_receipt(db, prefix + "transfer-1", describe(first));
    show("after transfer-1 twice");

    try {
        (void)move_money(db, prefix + "transfer-2", {"", "alice", "bob", 500});
    } catch (const insufficient_funds& e) {
        std::cout << "transfer-2: " << e.what() << ", rolled back\n";
    }
    show("after the failed transfer-2");
    db.transact([](idem::unit_of_work& uow) { uow.get<account>("alice").balance += 500; });
    std::cout << "transfer-2 retried: " << describe(move_money(db, prefix + "transfer-2", {"", "alice", "bob", 500}))
              << "\n";
    show("end");

    const bool ok = first.id == again.id && again.amount == 30 && balance(db, "alice") == 100 - 30 + 500 - 500 &&
                    balance(db, "bob") == 30 + 500;
    std::cout << (ok ? "each transfer moved money exactly once\n" : "MONEY MOVED WRONGLY\n");
    return ok ? 0 : 1;
}

// A fresh prefix per run: a PostgreSQL database outlives the program.
std::string run_prefix() {
    return std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "/";
}

}  // namespace bank

int main(int argc, char** argv) {
    try {
        std::string url;
        if (argc == 3 && std::string_view(argv[1]) == "--db")
            url = argv[2];
        else if (argc == 2)
            url = argv[1];
        else if (argc != 1)
            throw std::invalid_argument("usage: idem-transfer [--db URL]");
        if (!url.empty()) {
            const bool shared = idem::database_url::parse(url).scheme != "sqlite";  // a server's database
            return bank::run(url, shared ? bank::run_prefix() : "");
        }
        std::string dir = (std::filesystem::temp_directory_path() / "idem-transfer.XXXXXX").string();
        if (mkdtemp(dir.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory");
        const int status = bank::run("sqlite:" + dir + "/bank.db", "");
        std::filesystem::remove_all(dir);
        return status;
    } catch (const std::exception& e) {
        std::cerr << "idem-transfer: " << e.what() << "\n";
        return 1;
    }
}
