#include "idem/memory_store.hpp"
#include "store_context.hpp"

namespace idem::contract {
namespace {

struct memory_context final : store_context {
    std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>();

    [[nodiscard]] std::string name() const override { return "memory"; }
    [[nodiscard]] std::shared_ptr<record_store> make_store() override { return std::make_shared<memory_store>(clock); }
    void advance(duration by) override { clock->advance(by); }
};

}  // namespace

store_context& context() {
    static memory_context instance;
    return instance;
}

}  // namespace idem::contract
