#include "idem/operation_state.hpp"

namespace idem {

std::string_view to_string(operation_phase p) noexcept {
    switch (p) {
        case operation_phase::running: return "running";
        case operation_phase::compensating: return "compensating";
        case operation_phase::completed: return "completed";
        case operation_phase::compensated: return "compensated";
    }
    return "unknown";
}

}  // namespace idem
