// The SQL-store contract suite against the PostgreSQL store, on the database
// this process shares (the suite resets its tables), on a real clock: the
// database decides expiry, so the suite waits for real.
#include <soci/soci.h>

#include "idem/postgresql_store.hpp"
#include "idem/sql_contract.hpp"
#include "postgres_server.hpp"
#include "postgresql_refusals.hpp"

namespace {

namespace refusals = idem::test::pg_refusals;

struct postgresql_sql_context final : idem::contract::sql_store_context {
    std::string conninfo = idem::test::shared_postgres();

    [[nodiscard]] std::string name() const override { return "postgresql"; }
    [[nodiscard]] std::shared_ptr<idem::transactional_record_store> make_store() override {
        return std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{.connection = conninfo});
    }
    void connect(soci::session& session) override { idem::open_postgresql_session(session, conninfo); }

    [[nodiscard]] bool refuses_on_demand() const override { return true; }
    void refuse_completed_records(soci::session& session) override { refusals::refuse_completed_records(session); }
    void accept_completed_records(soci::session& session) override { refusals::accept_completed_records(session); }
    void refuse_deleting_records(soci::session& session) override { refusals::refuse_deleting_records(session); }
    void accept_deleting_records(soci::session& session) override { refusals::accept_deleting_records(session); }
};

}  // namespace

int main(int argc, char** argv) {
    postgresql_sql_context context;
    return idem::contract::run_sql(context, argc, argv);
}
