// The contract suite against the PostgreSQL store behind PgBouncer in
// transaction pooling (transaction_pooler): 4 server connections shared by
// every connection the suite opens, each transaction on any of them.
#include <soci/soci.h>

#include "idem/contract.hpp"
#include "idem/postgresql_store.hpp"
#include "idem/transaction_runner.hpp"
#include "pgbouncer.hpp"
#include "postgres_server.hpp"

namespace {

struct pgbouncer_context final : idem::contract::store_context {
    pgbouncer_context() {
        // Migrated directly: the pooler serves transactions, not schema changes.
        idem::postgresql_store migrated({.connection = server.conninfo()});
    }
    [[nodiscard]] std::string name() const override { return "postgresql behind pgbouncer"; }
    [[nodiscard]] std::shared_ptr<idem::record_store> make_store() override {
        return std::make_shared<idem::postgresql_store>(idem::postgresql_store_options{
            .connection = pooler.conninfo(), .pool_size = 16, .migrate_on_open = false, .transaction_pooler = true});
    }
    void run_in_transaction(const std::function<void(idem::unit_of_work&)>& work, bool commit) override {
        soci::session session;
        idem::open_postgresql_session(session, pooler.conninfo());
        idem::transaction_runner runner{session};
        runner.run([&](idem::unit_of_work& tx) { work(tx); }, [&] { return commit; });
    }

    idem::test::postgres_server server;
    idem::test::pgbouncer pooler{server.port(), {.pool_mode = "transaction", .pool_size = 4}};
};

}  // namespace

int main(int argc, char** argv) {
    pgbouncer_context context;
    return idem::contract::run(context, argc, argv);
}
