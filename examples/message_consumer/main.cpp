// Process a message once: a consumer whose broker redelivers, writing each
// invoice and the message's record in one SQLite transaction.
#include <soci/soci.h>
#include <idem/database.hpp>
#include <idem/inbox.hpp>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

struct message {
    std::string id;
    std::string tenant;
    std::string body;
};

// readme:begin process-once
enum class ack { ack, redeliver_later };

ack on_invoice_created(idem::inbox& box, idem::database& db, const message& msg) {
    const auto done = box.process(db, "billing.invoice-created", msg.id, idem::scope::tenant(msg.tenant),
                                  [&](idem::unit_of_work& uow) {  // the side effect, in the same transaction
                                      uow.sql() << "INSERT INTO invoices (body) VALUES (:b)", soci::use(msg.body);
                                  });
    switch (done.status()) {
        case idem::execution_status::executed:  // processed now
        case idem::execution_status::replayed:  // a duplicate: acknowledge it
            return ack::ack;
        default:  // in flight on another consumer: let the broker redeliver it
            return ack::redeliver_later;
    }
}
// readme:end process-once

int main() {
    const auto file = std::filesystem::temp_directory_path() / ("idem-consumer-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(file);
    idem::database db = idem::database::open("sqlite:" + file.string());
    db.migrate();
    db.transact([](idem::unit_of_work& uow) { uow.sql() << "CREATE TABLE invoices (body TEXT NOT NULL)"; });
    idem::inbox box(db.executor());
    const std::vector<message> deliveries{
        {"m-1", "acme", "invoice 1"}, {"m-2", "acme", "invoice 2"}, {"m-1", "acme", "invoice 1 (redelivered)"}};
    for (const auto& msg : deliveries) {
        const ack a = on_invoice_created(box, db, msg);
        std::cout << msg.id << ": " << (a == ack::ack ? "ack" : "redeliver later") << "\n";
    }
    const long long invoices = db.read([](soci::session& sql) {
        long long n = 0;
        sql << "SELECT COUNT(*) FROM invoices", soci::into(n);
        return n;
    });
    std::cout << invoices << " invoices created\n";
    std::filesystem::remove(file);
    return invoices == 2 ? 0 : 1;
}
