// Move money between two accounts in one transaction with an idempotent
// transfer command, on SQLite or PostgreSQL: the same key twice moves the money
// once; a transfer that fails rolls back, leaves no record, and can be retried
// with the same key. The transfer is a struct SOCI maps; once() returns it, and
// a replay reads the committed row back through the same mapping.
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

namespace bank {

// readme:begin database-row
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
// SOCI's own mapping of the row: used to write it (soci::use) and read it (soci::into).
template <>
struct soci::type_conversion<bank::transfer> {
    using base_type = soci::values;
    static void from_base(const soci::values& v, soci::indicator, bank::transfer& t) {
        t = {v.get<std::string>("id"), v.get<std::string>("from_account"), v.get<std::string>("to_account"),
             v.get<long long>("amount")};
    }
    static void to_base(const bank::transfer& t, soci::values& v, soci::indicator& ind) {
        v.set("id", t.id), v.set("from_account", t.from), v.set("to_account", t.to), v.set("amount", t.amount);
        ind = soci::i_ok;
    }
};

// What lets once() return a transfer with no codec: the record keeps the row's id,
// and a replay reads that row back (in the replaying transaction) through the mapping.
template <>
struct idem::stored_row<bank::transfer> {
    static std::string key(const bank::transfer& t) { return t.id; }
    static std::optional<bank::transfer> read(soci::session& sql, const std::string& id) {
        bank::transfer t;
        sql << "SELECT * FROM transfers WHERE id = :id", soci::use(id), soci::into(t);
        return sql.got_data() ? std::optional(t) : std::nullopt;
    }
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
        t.id = new_id();
        long long left = 0;
        uow.sql() << "UPDATE accounts SET balance = balance - :amount WHERE id = :id AND balance >= :needed "
                     "RETURNING balance",
            soci::use(t.amount), soci::use(t.from), soci::use(t.amount), soci::into(left);
        if (!uow.sql().got_data()) throw insufficient_funds();  // rolls back: no money moved, no record
        uow.sql() << "UPDATE accounts SET balance = balance + :amount WHERE id = :id", soci::use(t.amount),
            soci::use(t.to);
        uow.sql() << "INSERT INTO transfers (id, from_account, to_account, amount) "
                     "VALUES (:id, :from_account, :to_account, :amount)",
            soci::use(t);
        return t;
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
    db.migrate();  // idem's schema; safe to repeat
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS transfers (id TEXT PRIMARY KEY, from_account TEXT NOT NULL, "
                     "to_account TEXT NOT NULL, amount BIGINT NOT NULL)";
    });
    // readme:end database-open
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "INSERT INTO accounts (id, balance) VALUES ('alice', 100), ('bob', 0)"
                     " ON CONFLICT (id) DO UPDATE SET balance = excluded.balance";
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
    db.transact(
        [](idem::unit_of_work& uow) { uow.sql() << "UPDATE accounts SET balance = balance + 500 WHERE id = 'alice'"; });
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
            const bool shared = idem::database_url::parse(url).kind == idem::database_url::backend::postgresql;
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
