// The SQL-store contract suite against the SQLite store, on a manual clock:
// one database file for every scenario (the suite resets its tables), a store
// opened on it again and again, and triggers for the failures it injects.
#include <soci/soci.h>

#include <chrono>

#include "idem/sql_contract.hpp"
#include "idem/sqlite_store.hpp"
#include "temp_dir.hpp"

namespace {

using namespace std::chrono_literals;

struct sqlite_sql_context final : idem::contract::sql_store_context {
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();
    idem::test::temp_dir dir{"sql-contract-sqlite"};
    std::string path = (dir.path() / "contract.db").string();
    // A busy timeout long enough for the duplicate that waits on the write lock.
    idem::sqlite_connection_options connection{5s, idem::sqlite_synchronous::normal};

    [[nodiscard]] std::string name() const override { return "sqlite"; }
    [[nodiscard]] std::shared_ptr<idem::transactional_record_store> make_store() override {
        return std::make_shared<idem::sqlite_store>(
            idem::sqlite_store_options{.path = path, .connection = connection, .time = clock});
    }
    void connect(soci::session& session) override { idem::open_sqlite_session(session, path, connection); }
    void advance(idem::duration by) override { clock->advance(by); }

    [[nodiscard]] bool refuses_on_demand() const override { return true; }
    // A TEMP trigger lives on this connection only, and goes with it.
    void refuse_completed_records(soci::session& session) override {
        session << "CREATE TEMP TRIGGER refuse_results BEFORE INSERT ON idem_records WHEN NEW.state = 1"
                   " BEGIN SELECT RAISE(ABORT, 'refused'); END";
    }
    void accept_completed_records(soci::session& session) override { session << "DROP TRIGGER temp.refuse_results"; }
    // A trigger of the database file, so the store's own connections refuse too.
    void refuse_deleting_records(soci::session& session) override {
        session << "CREATE TRIGGER refuse_deletes BEFORE DELETE ON idem_records"
                   " BEGIN SELECT RAISE(ABORT, 'refused'); END";
    }
    void accept_deleting_records(soci::session& session) override { session << "DROP TRIGGER refuse_deletes"; }
};

}  // namespace

int main(int argc, char** argv) {
    sqlite_sql_context context;
    return idem::contract::run_sql(context, argc, argv);
}
