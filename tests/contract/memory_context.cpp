// The contract suite against the memory store, on a manual clock.
#include "idem/contract.hpp"
#include "idem/memory_store.hpp"

namespace {

struct memory_context final : idem::contract::store_context {
    std::shared_ptr<idem::manual_clock> clock = std::make_shared<idem::manual_clock>();

    [[nodiscard]] std::string name() const override { return "memory"; }
    [[nodiscard]] std::shared_ptr<idem::record_store> make_store() override {
        return std::make_shared<idem::memory_store>(clock);
    }
    void advance(idem::duration by) override { clock->advance(by); }
    [[nodiscard]] idem::duration short_span() const override { return std::chrono::seconds(30); }
};

}  // namespace

int main(int argc, char** argv) {
    memory_context context;
    return idem::contract::run(context, argc, argv);
}
