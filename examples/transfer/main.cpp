// Move money between two accounts in one transaction with an idempotent
// transfer command, on SQLite or PostgreSQL: the same key twice moves the money
// once; a transfer that fails rolls back, leaves no record, and can be retried
// with the same key.
//
//   idem-transfer [--db FILE]               SQLite (default: a temporary file, removed at exit)
//   idem-transfer --db postgresql://...     PostgreSQL: a URI or a "host=... dbname=..." string
#include <idem/execute_in_transaction.hpp>
#include <idem/idem.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/transaction_runner.hpp>
#include <soci/soci.h>
#ifdef IDEM_EXAMPLE_POSTGRESQL
#include <idem/postgresql_store.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

struct insufficient_funds : std::runtime_error {
    insufficient_funds() : std::runtime_error("insufficient funds") {}
};

// readme:begin sqlite-transfer
// Debits `from`, credits `to` and records the transfer in one transaction:
// all of it commits, or none of it does. A retry with the same key replays the
// first receipt without moving the money again.
std::string transfer(idem::executor& exec, idem::transaction_runner& runner, const std::string& key,
                     const std::string& from, const std::string& to, long long amount) {
    const idem::record_key record("bank.transfer", idem::scope::client("teller"), key);
    const std::string fingerprint = from + ">" + to + ":" + std::to_string(amount);
    return runner.run([&](idem::transaction& tx) {
        auto e = exec.execute(tx, record, fingerprint, {}, [&] {
            long long balance = 0;
            tx.session() << "SELECT balance FROM accounts WHERE id = :id", soci::use(from), soci::into(balance);
            if (balance < amount) throw insufficient_funds();  // rolls back: no money moved, no record
            tx.session() << "UPDATE accounts SET balance = balance - :a WHERE id = :id", soci::use(amount),
                soci::use(from);
            tx.session() << "UPDATE accounts SET balance = balance + :a WHERE id = :id", soci::use(amount),
                soci::use(to);
            return "moved " + std::to_string(amount) + " from " + from + " to " + to;
        }, idem::string_codec{});
        if (e.status() == idem::execution_status::key_reused)
            throw std::invalid_argument("this key was used for another transfer");
        return e.value();  // executed now, or the first run's receipt
    });
}
// readme:end sqlite-transfer

// readme:begin fast-transfer
// The same transfer, with the executor opening the transaction itself: on
// PostgreSQL the reservation travels in one round trip with BEGIN and the
// completed record in one with COMMIT, so idempotency adds no round trip.
std::string transfer_fast(idem::executor& exec, idem::transaction_runner& runner, const std::string& key,
                          const std::string& from, const std::string& to, long long amount) {
    const idem::record_key record("bank.transfer", idem::scope::client("teller"), key);
    const std::string fingerprint = from + ">" + to + ":" + std::to_string(amount);
    auto e = idem::execute_in_transaction(exec, runner, record, fingerprint, {}, [&](idem::transaction& tx) {
        long long left = 0;
        tx.session() << "UPDATE accounts SET balance = balance - :amount WHERE id = :id AND balance >= :needed"
                        " RETURNING balance", soci::use(amount), soci::use(from), soci::use(amount), soci::into(left);
        if (!tx.session().got_data()) throw insufficient_funds();  // rolls back: no money moved, no record
        tx.session() << "UPDATE accounts SET balance = balance + :a WHERE id = :id", soci::use(amount), soci::use(to);
        return "moved " + std::to_string(amount) + " from " + from + " to " + to;
    }, idem::string_codec{});
    if (e.status() == idem::execution_status::key_reused)
        throw std::invalid_argument("this key was used for another transfer");
    return e.value();
}
// readme:end fast-transfer

// readme:begin sqlite-lease
// An email has no transaction to join: lease mode reserves the key on the
// store's own connection first, sends, then stores the result.
void email_receipt(idem::executor& exec, const std::string& key, const std::string& receipt) {
    const idem::record_key record("bank.receipt-email", idem::scope::client("teller"), key);
    auto e = exec.execute(record, receipt, {}, [&] {
        std::cout << "  email: " << receipt << "\n";  // the side effect, outside any transaction
        return std::string("sent");
    }, idem::string_codec{});
    if (e.status() == idem::execution_status::replayed) std::cout << "  email: already sent\n";
}
// readme:end sqlite-lease

// readme:begin sqlite-setup
struct bank {
    std::shared_ptr<idem::sqlite_store> store;         // own connections (the detached view); migrates on open
    idem::executor exec{store};
    soci::session session;                             // the business connection
    std::unique_ptr<idem::transaction_runner> runner;  // one per session, kept as long as it

    explicit bank(const std::string& path)
        : store(std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{.path = path})) {
        idem::open_sqlite_session(session, path);  // WAL and busy timeout, like the store's connections
        runner = std::make_unique<idem::transaction_runner>(session);
    }
};
// readme:end sqlite-setup

#ifdef IDEM_EXAMPLE_POSTGRESQL
// readme:begin postgresql-setup
struct postgresql_bank {
    std::shared_ptr<idem::postgresql_store> store;     // one ledger for every instance; migrates on open
    idem::executor exec{store};
    soci::session session;                             // the business connection (READ COMMITTED)
    std::unique_ptr<idem::transaction_runner> runner;  // one per session, kept as long as it

    explicit postgresql_bank(const std::string& connection)  // "postgresql://app@db/bank" or "host=db dbname=bank"
        : store(std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = connection})) {
        idem::open_postgresql_session(session, connection);
        runner = std::make_unique<idem::transaction_runner>(session);
    }
};
// readme:end postgresql-setup
#endif

long long balance(soci::session& session, const std::string& account) {
    long long b = 0;
    session << "SELECT balance FROM accounts WHERE id = :id", soci::use(account), soci::into(b);
    return b;
}

// The same demonstration on either database: `prefix` keeps the keys of runs
// that share a database apart.
template <class Bank>
int run(Bank& b, const std::string& prefix) {
    idem::executor& exec = b.exec;
    soci::session& session = b.session;
    idem::transaction_runner& runner = *b.runner;

    session << "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
    session << "INSERT INTO accounts (id, balance) VALUES ('alice', 100), ('bob', 0)"
               " ON CONFLICT (id) DO UPDATE SET balance = excluded.balance";
    auto show = [&](const char* when) {
        std::cout << when << ": alice " << balance(session, "alice") << ", bob " << balance(session, "bob") << "\n";
    };
    show("start");

    const std::string first = transfer(exec, runner, prefix + "transfer-1", "alice", "bob", 30);
    const std::string again = transfer(exec, runner, prefix + "transfer-1", "alice", "bob", 30);  // a retry
    std::cout << "transfer-1: " << first << "\ntransfer-1 again: " << again << " (replayed)\n";
    email_receipt(exec, prefix + "transfer-1", first);
    email_receipt(exec, prefix + "transfer-1", first);
    show("after transfer-1 twice");

    try {
        (void)transfer(exec, runner, prefix + "transfer-2", "alice", "bob", 500);
    } catch (const insufficient_funds& e) {
        std::cout << "transfer-2: " << e.what() << ", rolled back\n";
    }
    show("after the failed transfer-2");
    session << "UPDATE accounts SET balance = balance + 500 WHERE id = 'alice'";  // a deposit
    std::cout << "transfer-2 retried: " << transfer(exec, runner, prefix + "transfer-2", "alice", "bob", 500) << "\n";
    show("after transfer-2");

    try {
        (void)transfer_fast(exec, runner, prefix + "transfer-4", "bob", "alice", 2000);
    } catch (const insufficient_funds& e) {
        std::cout << "transfer-4: " << e.what() << ", rolled back\n";
    }
    const std::string fast = transfer_fast(exec, runner, prefix + "transfer-3", "bob", "alice", 20);
    const std::string fast_again = transfer_fast(exec, runner, prefix + "transfer-3", "bob", "alice", 20);
    std::cout << "transfer-3: " << fast << "\ntransfer-3 again: " << fast_again << " (replayed)\n";
    show("end");

    const bool ok = first == again && fast == fast_again && balance(session, "alice") == 100 - 30 + 500 - 500 + 20 &&
                    balance(session, "bob") == 30 + 500 - 20;
    std::cout << (ok ? "each transfer moved money exactly once\n" : "MONEY MOVED WRONGLY\n");
    return ok ? 0 : 1;
}

int run_sqlite(const std::string& path) {
    bank b(path);
    return run(b, "");
}

// A fresh prefix per run: a PostgreSQL database outlives the program.
std::string run_prefix() {
    return std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "/";
}

bool is_postgresql(const std::string& db) {
    return db.starts_with("postgresql://") || db.starts_with("postgres://") || db.find('=') != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string db;
        if (argc == 3 && std::string_view(argv[1]) == "--db") db = argv[2];
        else if (argc == 2) db = argv[1];
        else if (argc != 1) throw std::invalid_argument("usage: idem-transfer [--db FILE | --db POSTGRESQL]");
        if (is_postgresql(db)) {
#ifdef IDEM_EXAMPLE_POSTGRESQL
            postgresql_bank b(db);
            return run(b, run_prefix());
#else
            throw std::invalid_argument("this build has no PostgreSQL store");
#endif
        }
        if (!db.empty()) return run_sqlite(db);
        std::string dir = (std::filesystem::temp_directory_path() / "idem-transfer.XXXXXX").string();
        if (mkdtemp(dir.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory");
        const int status = run_sqlite(dir + "/bank.db");
        std::filesystem::remove_all(dir);
        return status;
    } catch (const std::exception& e) {
        std::cerr << "idem-transfer: " << e.what() << "\n";
        return 1;
    }
}
