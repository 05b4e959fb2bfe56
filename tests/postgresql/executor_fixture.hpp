// A bank, an executor on the PostgreSQL store and a business connection, for
// the executor and execute_in_transaction tests.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

#include "bank.hpp"
#include "idem/execute_in_transaction.hpp"
#include "idem/executor.hpp"
#include "postgres_server.hpp"
#include "recording_sink.hpp"

namespace idem::test {

struct business_failure : std::runtime_error {
    business_failure() : std::runtime_error("business failure") {}
};

struct executor_fixture {
    // A business connection of its own, as another instance of the service has.
    struct connection {
        soci::session session;
        std::unique_ptr<transaction_runner> runner;
        explicit connection(const std::string& conninfo) {
            open_postgresql_session(session, conninfo);
            runner = std::make_unique<transaction_runner>(session);
        }
    };

    std::string conninfo = shared_postgres();
    std::shared_ptr<postgresql_store> store =
        std::make_shared<postgresql_store>(postgresql_store_options{.connection = conninfo});
    std::shared_ptr<recording_sink> sink = std::make_shared<recording_sink>();
    executor exec{store, {}, sink};
    string_codec codec;
    soci::session session;
    std::unique_ptr<transaction_runner> runner;
    std::atomic<int> runs{0};

    executor_fixture() {
        open_postgresql_session(session, conninfo);
        pg_bank::reset(session);
        runner = std::make_unique<transaction_runner>(session);
    }

    // The business operation: moves money through the transaction's session.
    auto operation(transaction& tx, const std::string& key) {
        return [&tx, key, this] {
            ++runs;
            pg_bank::move_money(tx.session(), key, 10);
            return std::string("moved 10");
        };
    }

    // The same for execute_in_transaction, which hands the transaction over.
    auto operation(const std::string& key) {
        return [key, this](transaction& tx) {
            ++runs;
            pg_bank::move_money(tx.session(), key, 10);
            return std::string("moved 10");
        };
    }

    // runner.run around executor.execute(tx, ...): the plain form.
    execution<std::string> transfer(const std::string& key, execution_options options = {},
                                    const char* fingerprint = pg_bank::fingerprint) {
        return runner->run([&](transaction& tx) {
            return exec.execute(tx, pg_bank::transfer_key(key), fingerprint, options, operation(tx, key), codec);
        });
    }

    // The same through execute_in_transaction: the fast path.
    execution<std::string> transfer_fast(const std::string& key, execution_options options = {},
                                         const char* fingerprint = pg_bank::fingerprint) {
        return execute_in_transaction(exec, *runner, pg_bank::transfer_key(key), fingerprint, options, operation(key),
                                      codec);
    }

    // What the store holds for the key, seen from its own connection.
    reservation_status record(const std::string& key) {
        auto r = store->try_reserve(pg_bank::transfer_key(key), pg_bank::fingerprint, std::chrono::minutes(1));
        if (r.status == reservation_status::reserved) {
            if (!store->release(pg_bank::transfer_key(key), r.token))
                throw std::logic_error("could not release a probe reservation");
        }
        return r.status;
    }

    long long ledger() { return pg_bank::count(session, "SELECT count(*) FROM ledger"); }
};

}  // namespace idem::test
