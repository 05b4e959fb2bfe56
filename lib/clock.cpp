#include "idem/clock.hpp"

namespace idem {
namespace {

class system_clock final : public clock {
public:
    [[nodiscard]] time_point now() const override { return std::chrono::system_clock::now(); }
};

}  // namespace

std::shared_ptr<const clock> clock::system() {
    static const auto instance = std::make_shared<const system_clock>();
    return instance;
}

}  // namespace idem
