// Process a message once: a consumer whose broker redelivers.
#include <idem/idem.hpp>
#include <idem/memory_store.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

struct message {
    std::string id;
    std::string tenant;
    std::string body;
};

// readme:begin process-once
enum class ack { ack, redeliver_later };

ack on_invoice_created(idem::inbox& box, const message& msg, std::vector<std::string>& invoices) {
    const auto status = box.process("billing.invoice-created", msg.id, idem::scope::tenant(msg.tenant),
                                    [&] { invoices.push_back(msg.body); });  // the side effect
    switch (status) {
        case idem::execution_status::executed:  // processed now
        case idem::execution_status::replayed:  // a duplicate: acknowledge it
            return ack::ack;
        default:  // in flight on another consumer: let the broker redeliver it
            return ack::redeliver_later;
    }
}
// readme:end process-once

int main() {
    idem::executor exec(std::make_shared<idem::memory_store>());
    idem::inbox box(exec);
    std::vector<std::string> invoices;
    const std::vector<message> deliveries{
        {"m-1", "acme", "invoice 1"}, {"m-2", "acme", "invoice 2"}, {"m-1", "acme", "invoice 1 (redelivered)"}};
    for (const auto& msg : deliveries) {
        const ack a = on_invoice_created(box, msg, invoices);
        std::cout << msg.id << ": " << (a == ack::ack ? "ack" : "redeliver later") << "\n";
    }
    std::cout << invoices.size() << " invoices created\n";
    return invoices.size() == 2 ? 0 : 1;
}
