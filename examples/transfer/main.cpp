// Move money between two accounts in one SQLite transaction with an idempotent
// transfer command: the same key twice moves the money once; a transfer that
// fails rolls back, leaves no record, and can be retried with the same key.
//
//   idem-transfer [database file]   (default: a temporary one, removed at exit)
#include <idem/idem.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/transaction_runner.hpp>
#include <soci/soci.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

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

long long balance(soci::session& session, const std::string& account) {
    long long b = 0;
    session << "SELECT balance FROM accounts WHERE id = :id", soci::use(account), soci::into(b);
    return b;
}

int run(const std::string& path) {
    bank b(path);
    idem::executor& exec = b.exec;
    soci::session& session = b.session;
    idem::transaction_runner& runner = *b.runner;

    session << "CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL)";
    session << "INSERT OR REPLACE INTO accounts (id, balance) VALUES ('alice', 100), ('bob', 0)";
    auto show = [&](const char* when) {
        std::cout << when << ": alice " << balance(session, "alice") << ", bob " << balance(session, "bob") << "\n";
    };
    show("start");

    const std::string first = transfer(exec, runner, "transfer-1", "alice", "bob", 30);
    const std::string again = transfer(exec, runner, "transfer-1", "alice", "bob", 30);  // a retry
    std::cout << "transfer-1: " << first << "\ntransfer-1 again: " << again << " (replayed)\n";
    email_receipt(exec, "transfer-1", first);
    email_receipt(exec, "transfer-1", first);
    show("after transfer-1 twice");

    try {
        (void)transfer(exec, runner, "transfer-2", "alice", "bob", 500);
    } catch (const insufficient_funds& e) {
        std::cout << "transfer-2: " << e.what() << ", rolled back\n";
    }
    show("after the failed transfer-2");
    session << "UPDATE accounts SET balance = balance + 500 WHERE id = 'alice'";  // a deposit
    std::cout << "transfer-2 retried: " << transfer(exec, runner, "transfer-2", "alice", "bob", 500) << "\n";
    show("end");

    const bool ok = first == again && balance(session, "alice") == 100 - 30 + 500 - 500 &&
                    balance(session, "bob") == 30 + 500;
    std::cout << (ok ? "each transfer moved money exactly once\n" : "MONEY MOVED WRONGLY\n");
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc > 1) return run(argv[1]);
        std::string dir = (std::filesystem::temp_directory_path() / "idem-transfer.XXXXXX").string();
        if (mkdtemp(dir.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory");
        const int status = run(dir + "/bank.db");
        std::filesystem::remove_all(dir);
        return status;
    } catch (const std::exception& e) {
        std::cerr << "idem-transfer: " << e.what() << "\n";
        return 1;
    }
}
