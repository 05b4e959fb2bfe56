#include <thread>

#include "idem/redis_store.hpp"
#include "redis_cluster.hpp"
#include "store_context.hpp"

namespace idem::contract {
namespace {

using namespace std::chrono_literals;

// Redis Cluster: a throwaway 3-master cluster this process starts; keys spread over its masters.
struct redis_cluster_context final : store_context {
    [[nodiscard]] std::string name() const override { return "redis-cluster"; }
    [[nodiscard]] std::shared_ptr<record_store> make_store() override {
        static test::redis_cluster cluster;
        redis_options options;
        options.cluster = true;
        options.host = cluster.nodes().front().host;
        options.port = cluster.nodes().front().port;
        options.pool_size = 16;  // per master: fewer than the race's 64 threads on one key
        return std::make_shared<redis_store>(options);
    }
    void advance(duration by) override { std::this_thread::sleep_for(by); }
    [[nodiscard]] duration short_span() const override { return 100ms; }
};

}  // namespace

store_context& context() {
    static redis_cluster_context instance;
    return instance;
}

}  // namespace idem::contract
