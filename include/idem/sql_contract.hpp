// idem/sql_contract.hpp: run the SQL-store contract suite against your own SQL store
// (library idem_sql_contract, pkg-config `idem-sql-contract`).
//
//   struct my_context final : idem::contract::sql_store_context {
//       std::string name() const override { return "mine"; }
//       std::shared_ptr<idem::transactional_record_store> make_store() override { return open_my_store(); }
//       void connect(soci::session& session) override { open_my_session(session); }
//   };
//   int main(int argc, char** argv) { my_context c; return idem::contract::run_sql(c, argc, argv); }
//
// What it checks, and the database it needs: docs/custom-store.md.
#pragma once

#include <memory>
#include <string>

#include "idem/clock.hpp"
#include "idem/transactional_record_store.hpp"

namespace soci {
class session;
}

#define IDEM_SQL_CONTRACT_API [[gnu::visibility("default")]]

namespace idem::contract {

// What a SQL store supplies: its store and sessions on one database.
class IDEM_SQL_CONTRACT_API sql_store_context {
public:
    virtual ~sql_store_context();

    [[nodiscard]] virtual std::string name() const = 0;
    // A store on the database, its schema migrated; called at least once per scenario.
    [[nodiscard]] virtual std::shared_ptr<transactional_record_store> make_store() = 0;
    // Opens another session on the same database, configured as the
    // application's would be: another instance of the service.
    virtual void connect(soci::session& session) = 0;

    // Lets `by` of the store's time pass. The default sleeps, which suits a store
    // on a real clock; a store on an injected clock (idem::manual_clock) advances it.
    virtual void advance(duration by);
    // Empties the record tables between scenarios. The default runs
    // DELETE FROM idem_records and DELETE FROM idem_tombstones.
    virtual void clear_records(soci::session& session);

    // Failure injection for the Observe scenarios, in the dialect's own SQL (a
    // trigger that raises, say). Scenarios that need it run only when
    // refuses_on_demand() is true; the defaults throw std::logic_error.
    [[nodiscard]] virtual bool refuses_on_demand() const { return false; }
    // From now on every completed-record write on `session` fails, as a lock or
    // statement timeout would; the store's own sessions are unaffected.
    virtual void refuse_completed_records(soci::session& session);
    virtual void accept_completed_records(soci::session& session);
    // From now on deleting a record fails on every session the store may use for
    // it: its own and, where its detached view joins the open transaction, `session`.
    virtual void refuse_deleting_records(soci::session& session);
    virtual void accept_deleting_records(soci::session& session);
};

// Runs every SQL-store scenario against `context`, with doctest's command line
// (--test-case=..., --success, ...): the record in the caller's transaction,
// the executor's placement of it (inside, before or beside the business
// transaction) and store_admin. Scenarios on store_admin are left out when the
// store is not one, failure injection when the context offers none. Returns the exit code: 0 when every scenario
// passed.
IDEM_SQL_CONTRACT_API int run_sql(sql_store_context& context, int argc, char** argv);

}  // namespace idem::contract
