// The contract suite against the PostgreSQL store. A real clock: the database
// decides expiry, so the suite waits for real (the context's defaults).
#include <soci/soci.h>

#include "idem/contract.hpp"
#include "idem/postgresql_store.hpp"
#include "idem/transaction_runner.hpp"
#include "postgres_server.hpp"

namespace {

struct postgresql_context final : idem::contract::store_context {
    [[nodiscard]] std::string name() const override { return "postgresql"; }
    [[nodiscard]] std::shared_ptr<idem::record_store> make_store() override {
        idem::postgresql_store_options options;
        options.connection = idem::test::shared_postgres();
        options.pool_size = 16;  // fewer than the race's 64 threads: the rest wait for a connection
        return std::make_shared<idem::postgresql_store>(options);
    }
    void run_in_transaction(const std::function<void(idem::unit_of_work&)>& work, bool commit) override {
        soci::session session;
        idem::open_postgresql_session(session, idem::test::shared_postgres());
        idem::transaction_runner runner{session};
        runner.run([&](idem::unit_of_work& tx) { work(tx); }, [&] { return commit; });
    }
};

}  // namespace

int main(int argc, char** argv) {
    postgresql_context context;
    return idem::contract::run(context, argc, argv);
}
