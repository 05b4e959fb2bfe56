// An executor on a SQL store with its telemetry recorded, a business session on
// the bank, and the transfer run through them: what the contract suite's
// placement scenarios and each store's own executor tests share.
#pragma once

#include <soci/soci.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "bank.hpp"
#include "idem/detail/run_owned.hpp"
#include "idem/executor.hpp"
#include "recording_sink.hpp"

namespace idem::test {

struct bank_executor {
    std::shared_ptr<transactional_record_store> store;
    std::shared_ptr<recording_sink> sink = std::make_shared<recording_sink>();
    executor exec{store, {}, sink};
    string_codec codec;
    soci::session session;
    std::unique_ptr<transaction_runner> runner;
    std::atomic<int> runs{0};

    // `open(session)` connects the business session and sets the bank up.
    template <class Open>
    bank_executor(std::shared_ptr<transactional_record_store> records, Open&& open) : store(std::move(records)) {
        std::forward<Open>(open)(session);
        runner = std::make_unique<transaction_runner>(session);
    }

    // The business operation: moves money through the transaction's session.
    auto operation(unit_of_work& tx, const std::string& key) {
        return [&tx, key, this] {
            ++runs;
            bank::move_money(tx.sql(), key, 10);
            return std::string("moved 10");
        };
    }

    // The same for execute_in_transaction, which hands the transaction over.
    auto operation(const std::string& key) {
        return [key, this](unit_of_work& tx) {
            ++runs;
            bank::move_money(tx.sql(), key, 10);
            return std::string("moved 10");
        };
    }

    // runner.run around executor.execute(tx, ...): the plain form.
    execution<std::string> transfer(const std::string& key, execution_options options = {},
                                    const char* fingerprint = bank::fingerprint) {
        return runner->run([&](unit_of_work& tx) {
            return idem::detail::executor_access::execute_in(exec, tx, bank::transfer_key(key), fingerprint, options,
                                                             operation(tx, key), codec);
        });
    }

    // The same through execute_in_transaction: the fast path.
    execution<std::string> transfer_fast(const std::string& key, execution_options options = {},
                                         const char* fingerprint = bank::fingerprint) {
        return idem::detail::execute_in_transaction(exec, *runner, bank::transfer_key(key), fingerprint, options,
                                                    operation(key), codec);
    }

    // Lease mode around a business transaction that moves the money, then throws
    // bank::business_failure: the record is the store's, the failure the business's.
    void transfer_failing_in_lease_mode(const std::string& key, execution_options options = {}) {
        (void)exec.execute(
            bank::transfer_key(key), bank::fingerprint, options,
            [&]() -> std::string {
                runner->run([&](unit_of_work& tx) {
                    bank::move_money(tx.sql(), key, 10);
                    throw bank::business_failure();
                });
                return "unreachable";
            },
            codec);
    }

    // What the store holds for the key, seen from its own connection.
    reservation_status record(const std::string& key) { return bank::detached_status(*store, key); }

    long long ledger() { return bank::count(session, "SELECT count(*) FROM ledger"); }
};

}  // namespace idem::test
