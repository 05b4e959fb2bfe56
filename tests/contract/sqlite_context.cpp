// The contract suite against the SQLite store, on a manual clock. One database
// file for every scenario (they use namespaces of their own), opened by a new
// store each time, so open and migrate run again and again.
#include <soci/soci.h>

#include "idem/contract.hpp"
#include "idem/sqlite_store.hpp"
#include "idem/transaction_runner.hpp"
#include "temp_dir.hpp"

namespace {

struct sqlite_context final : idem::contract::store_context {
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();
    idem::test::temp_dir dir{"contract-sqlite"};

    [[nodiscard]] std::string path() const { return (dir.path() / "contract.db").string(); }
    [[nodiscard]] std::string name() const override { return "sqlite"; }
    [[nodiscard]] std::shared_ptr<idem::record_store> make_store() override {
        idem::sqlite_store_options options;
        options.path = path();
        options.connection.synchronous = idem::sqlite_synchronous::normal;
        options.time = clock;
        return std::make_shared<idem::sqlite_store>(options);
    }
    void advance(idem::duration by) override { clock->advance(by); }
    [[nodiscard]] idem::duration short_span() const override { return std::chrono::seconds(30); }
    void run_in_transaction(const std::function<void(idem::unit_of_work&)>& work, bool commit) override {
        soci::session session;
        idem::open_sqlite_session(session, path());
        idem::transaction_runner runner{session};
        runner.run([&](idem::unit_of_work& tx) { work(tx); }, [&] { return commit; });
    }
};

}  // namespace

int main(int argc, char** argv) {
    sqlite_context context;
    return idem::contract::run(context, argc, argv);
}
