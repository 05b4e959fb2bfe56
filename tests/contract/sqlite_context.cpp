#include "idem/sqlite_store.hpp"
#include "store_context.hpp"
#include "temp_dir.hpp"

namespace idem::contract {
namespace {

// One database file for every scenario (they use namespaces of their own),
// opened by a new store each time, so open and migrate run again and again.
struct sqlite_context final : store_context {
    std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>();
    test::temp_dir dir{"contract-sqlite"};

    [[nodiscard]] std::string name() const override { return "sqlite"; }
    [[nodiscard]] std::shared_ptr<record_store> make_store() override {
        sqlite_store_options options;
        options.path = (dir.path() / "contract.db").string();
        options.connection.synchronous = sqlite_synchronous::normal;
        options.time = clock;
        return std::make_shared<sqlite_store>(options);
    }
    void advance(duration by) override { clock->advance(by); }
};

}  // namespace

store_context& context() {
    static sqlite_context instance;
    return instance;
}

}  // namespace idem::contract
