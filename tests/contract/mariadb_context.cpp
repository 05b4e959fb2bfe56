// The contract suite against the MariaDB store, on a manual clock (the
// records' times are this process's). One database for every scenario (they
// use namespaces of their own), opened by a new store each time, so open and
// migrate run again and again.
#include <soci/soci.h>

#include "idem/contract.hpp"
#include "idem/mariadb_store.hpp"
#include "idem/transaction_runner.hpp"
#include "mariadb_server.hpp"

namespace {

struct mariadb_context final : idem::contract::store_context {
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();
    std::string url = idem::test::shared_mariadb();

    [[nodiscard]] std::string name() const override { return "mariadb"; }
    [[nodiscard]] std::shared_ptr<idem::record_store> make_store() override {
        idem::mariadb_store_options options;
        options.connection = url;
        options.pool_size = 16;  // fewer than the race's 64 threads: the rest wait for a connection
        options.time = clock;
        return std::make_shared<idem::mariadb_store>(options);
    }
    void advance(idem::duration by) override { clock->advance(by); }
    [[nodiscard]] idem::duration short_span() const override { return std::chrono::seconds(30); }
    void run_in_transaction(const std::function<void(idem::unit_of_work&)>& work, bool commit) override {
        soci::session session;
        idem::open_mariadb_session(session, url);
        idem::transaction_runner runner{session};
        runner.run([&](idem::unit_of_work& tx) { work(tx); }, [&] { return commit; });
    }
};

}  // namespace

int main(int argc, char** argv) {
    mariadb_context context;
    return idem::contract::run(context, argc, argv);
}
