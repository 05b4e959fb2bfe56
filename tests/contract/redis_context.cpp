#include <thread>

#include "idem/redis_store.hpp"
#include "redis_server.hpp"
#include "store_context.hpp"

namespace idem::contract {
namespace {

using namespace std::chrono_literals;

// A real clock: Redis decides expiry, so advance() waits for real.
struct redis_context final : store_context {
    [[nodiscard]] std::string name() const override { return "redis"; }
    [[nodiscard]] std::shared_ptr<record_store> make_store() override {
        const auto at = test::shared_redis();
        redis_options options;
        options.host = at.host;
        options.port = at.port;
        options.pool_size = 16;  // fewer than the race's 64 threads: the rest wait for a connection
        return std::make_shared<redis_store>(options);
    }
    void advance(duration by) override { std::this_thread::sleep_for(by); }
    [[nodiscard]] duration short_span() const override { return 100ms; }
};

}  // namespace

store_context& context() {
    static redis_context instance;
    return instance;
}

}  // namespace idem::contract
