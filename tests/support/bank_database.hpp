// What a SQL store supplies to the executor tests written once
// (tests/sqlite/placement_suite.cpp, executor_fixture.hpp): one scenario's
// database, a store on it and business connections to it.
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
    // From now on every completed-record write on this business connection fails,
    // as a lock or statement timeout would; the store's own connections are unaffected.
    virtual void refuse_completed_records(soci::session& session) = 0;
    // Undoes refuse_completed_records.
    virtual void accept_completed_records(soci::session& session) = 0;
    // From now on deleting a record fails (a trigger raises), on every connection
    // the store may use for it: the store's own and, where the detached view
    // joins the open transaction (SQLite), this business connection.
    virtual void refuse_deleting_records(soci::session& session) = 0;
    // Undoes refuse_deleting_records.
    virtual void accept_deleting_records(soci::session& session) = 0;
};

// A database of its own for one scenario; defined once per test binary, by the store's tests.
[[nodiscard]] std::unique_ptr<bank_database> fresh_bank_database();

}  // namespace idem::test
