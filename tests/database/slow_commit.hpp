// PostgreSQL COMMITs that wait, so that a test can break the connection while
// the server commits (the outcome is in doubt, and it committed) or end the
// backend meanwhile (it rolled back).
#pragma once

#include <doctest/doctest.h>

#include <soci/soci.h>

#include <chrono>
#include <string>
#include <thread>

#include "idem/database.hpp"

namespace idem::test {

// Every COMMIT of a transaction that inserted into `table` waits a second in a deferred trigger.
inline void slow_commits(idem::database& db, const std::string& table) {
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "PERFORM pg_sleep(1); RETURN NULL; END $$";
        uow.sql() << "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON " + table +
                         " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()";
    });
}

// Returns once a COMMIT waits in the trigger.
inline void wait_for_commit(soci::session& admin) {
    for (int i = 0; i < 500; ++i) {
        int sleeping = 0;
        admin << "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'", soci::into(sleeping);
        if (sleeping == 1) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("no COMMIT reached the trigger");
}

}  // namespace idem::test
