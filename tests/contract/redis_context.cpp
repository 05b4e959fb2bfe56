// The contract suite against the Redis store. A real clock: Redis decides
// expiry, so the suite waits for real (the context's defaults).
#include "idem/contract.hpp"
#include "idem/redis_store.hpp"
#include "redis_server.hpp"

namespace {

struct redis_context final : idem::contract::store_context {
    [[nodiscard]] std::string name() const override { return "redis"; }
    [[nodiscard]] std::shared_ptr<idem::record_store> make_store() override {
        const auto at = idem::test::shared_redis();
        idem::redis_options options;
        options.host = at.host;
        options.port = at.port;
        options.pool_size = 16;  // fewer than the race's 64 threads: the rest wait for a connection
        return std::make_shared<idem::redis_store>(options);
    }
};

}  // namespace

int main(int argc, char** argv) {
    redis_context context;
    return idem::contract::run(context, argc, argv);
}
