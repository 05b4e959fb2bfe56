// The SQL-store contract suite against the PostgreSQL store behind PgBouncer in
// transaction pooling: 4 server connections shared by every session the suite
// opens, each transaction on any of them. The failures the suite injects hang
// on a session setting, which transaction pooling does not keep, so the
// context offers none (postgresql_sql_context.cpp runs those scenarios).
#include <soci/soci.h>

#include "idem/postgresql_store.hpp"
#include "idem/sql_contract.hpp"
#include "pgbouncer.hpp"
#include "postgres_server.hpp"

namespace {

struct pgbouncer_sql_context final : idem::contract::sql_store_context {
    pgbouncer_sql_context() {
        // Migrated directly: the pooler serves transactions, not schema changes.
        idem::postgresql_store migrated({.connection = server.conninfo()});
    }
    [[nodiscard]] std::string name() const override { return "postgresql behind pgbouncer"; }
    [[nodiscard]] std::shared_ptr<idem::transactional_record_store> make_store() override {
        return std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{
            .connection = pooler.conninfo(), .migrate_on_open = false, .transaction_pooler = true});
    }
    void connect(soci::session& session) override { idem::open_postgresql_session(session, pooler.conninfo()); }

    idem::test::postgres_server server;
    idem::test::pgbouncer pooler{server.port(), {.pool_mode = "transaction", .pool_size = 4}};
};

}  // namespace

int main(int argc, char** argv) {
    pgbouncer_sql_context context;
    return idem::contract::run_sql(context, argc, argv);
}
