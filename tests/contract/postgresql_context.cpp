#include <thread>

#include "idem/postgresql_store.hpp"
#include "postgres_server.hpp"
#include "store_context.hpp"

namespace idem::contract {
namespace {

using namespace std::chrono_literals;

// A real clock: the database decides expiry, so advance() waits for real.
struct postgresql_context final : store_context {
    [[nodiscard]] std::string name() const override { return "postgresql"; }
    [[nodiscard]] std::shared_ptr<record_store> make_store() override {
        postgresql_store_options options;
        options.connection = test::shared_postgres();
        options.pool_size = 16;  // fewer than the race's 64 threads: the rest wait for a connection
        return std::make_shared<postgresql_store>(options);
    }
    void advance(duration by) override { std::this_thread::sleep_for(by); }
    [[nodiscard]] duration short_span() const override { return 100ms; }
};

}  // namespace

store_context& context() {
    static postgresql_context instance;
    return instance;
}

}  // namespace idem::contract
