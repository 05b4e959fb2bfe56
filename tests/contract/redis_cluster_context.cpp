// The contract suite against Redis Cluster: a throwaway 3-master cluster this
// process starts; keys spread over its masters. A real clock, as on one server.
#include "idem/contract.hpp"
#include "idem/redis_store.hpp"
#include "redis_cluster.hpp"

namespace {

struct redis_cluster_context final : idem::contract::store_context {
    [[nodiscard]] std::string name() const override { return "redis-cluster"; }
    [[nodiscard]] std::shared_ptr<idem::record_store> make_store() override {
        static idem::test::redis_cluster cluster;
        idem::redis_options options;
        options.cluster = true;
        options.host = cluster.nodes().front().host;
        options.port = cluster.nodes().front().port;
        options.pool_size = 16;  // per master: fewer than the race's 64 threads on one key
        return std::make_shared<idem::redis_store>(options);
    }
};

}  // namespace

int main(int argc, char** argv) {
    redis_cluster_context context;
    return idem::contract::run(context, argc, argv);
}
