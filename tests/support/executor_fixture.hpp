// A bank, an executor on a SQL store and a business connection, for each
// store's own executor cases and execute_in_transaction's. The store comes from the test
// binary's fresh_bank_database().
#pragma once

#include <soci/soci.h>

#include <memory>
#include <string>

#include "bank_database.hpp"
#include "bank_executor.hpp"

namespace idem::test {

struct executor_fixture : bank_executor {
    // A business connection of its own, as another instance of the service has.
    struct connection {
        soci::session session;
        std::unique_ptr<transaction_runner> runner;
        explicit connection(bank_database& database) {
            database.connect(session);
            runner = std::make_unique<transaction_runner>(session);
        }
    };

    std::unique_ptr<bank_database> database;

    executor_fixture() : executor_fixture(fresh_bank_database()) {}

private:
    explicit executor_fixture(std::unique_ptr<bank_database> fresh)
        : bank_executor(fresh->make_store(),
                        [&fresh](soci::session& s) {
                            fresh->connect(s);
                            fresh->reset_bank(s);
                        }),
          database(std::move(fresh)) {}
};

}  // namespace idem::test
