// What a SQL store supplies to its executor tests (executor_fixture.hpp): one
// scenario's database, a store on it and business connections to it. The
// placement scenarios every SQL store shares run in the SQL-store contract
// suite (lib/sql_contract) instead.
#pragma once

#include <memory>

#include "idem/transactional_record_store.hpp"

namespace soci {
class session;
}

namespace idem::test {

struct bank_database {
    virtual ~bank_database() = default;

    // A store on this database, its schema migrated.
    [[nodiscard]] virtual std::shared_ptr<transactional_record_store> make_store() = 0;
    // Opens a business connection to this database, configured as the application's would be.
    virtual void connect(soci::session& session) = 0;
    // The test bank at its opening balances, and no records (a store has migrated by then).
    virtual void reset_bank(soci::session& session) = 0;
};

// A database of its own for one scenario; defined once per test binary, by the store's tests.
[[nodiscard]] std::unique_ptr<bank_database> fresh_bank_database();

}  // namespace idem::test
