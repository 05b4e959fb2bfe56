#include "crash_point.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>
#include <string_view>

namespace payments {

void crash_point(const char* name) {
    static const char* const chosen = std::getenv("IDEM_PAYMENTS_CRASH_AT");
    static const long after = [] {
        const char* n = std::getenv("IDEM_PAYMENTS_CRASH_AFTER");
        return n != nullptr ? std::max(1L, std::strtol(n, nullptr, 10)) : 1L;
    }();
    static std::atomic<long> reached{0};
    if (chosen == nullptr || std::string_view(chosen) != name) return;
    if (++reached >= after) std::raise(SIGKILL);
}

}  // namespace payments
