// The SQL-store contract suite against the MariaDB store, on the database
// this process shares (the suite resets its tables), on a real clock.
#include <soci/soci.h>

#include "idem/mariadb_store.hpp"
#include "idem/sql_contract.hpp"
#include "mariadb_server.hpp"

namespace {

struct mariadb_sql_context final : idem::contract::sql_store_context {
    std::string url = idem::test::shared_mariadb();

    [[nodiscard]] std::string name() const override { return "mariadb"; }
    [[nodiscard]] std::shared_ptr<idem::transactional_record_store> make_store() override {
        return std::make_shared<idem::mariadb_store>(idem::mariadb_store_options{.connection = url});
    }
    void connect(soci::session& session) override { idem::open_mariadb_session(session, url); }

    // Failures injected by triggers that raise: on completed-record writes of
    // one session (a user variable limits the database's trigger to it), or on
    // every delete (the detached view deletes on the store's own sessions).
    [[nodiscard]] bool refuses_on_demand() const override { return true; }
    void refuse_completed_records(soci::session& session) override {
        session << "CREATE TRIGGER refuse_results BEFORE UPDATE ON idem_records FOR EACH ROW "
                   "IF NEW.state = 1 AND @refuse_results = 1 THEN SIGNAL SQLSTATE '45000' "
                   "SET MESSAGE_TEXT = 'refused'; END IF";
        session << "CREATE TRIGGER refuse_new_results BEFORE INSERT ON idem_records FOR EACH ROW "
                   "IF NEW.state = 1 AND @refuse_results = 1 THEN SIGNAL SQLSTATE '45000' "
                   "SET MESSAGE_TEXT = 'refused'; END IF";
        session << "SET @refuse_results = 1";
    }
    void accept_completed_records(soci::session& session) override {
        session << "SET @refuse_results = 0";
        session << "DROP TRIGGER refuse_results";
        session << "DROP TRIGGER refuse_new_results";
    }
    void refuse_deleting_records(soci::session& session) override {
        session << "CREATE TRIGGER refuse_deletes BEFORE DELETE ON idem_records FOR EACH ROW "
                   "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'";
    }
    void accept_deleting_records(soci::session& session) override { session << "DROP TRIGGER refuse_deletes"; }
};

}  // namespace

int main(int argc, char** argv) {
    mariadb_sql_context context;
    return idem::contract::run_sql(context, argc, argv);
}
