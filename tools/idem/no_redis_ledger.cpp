#include <stdexcept>

#include "redis_ledger.hpp"

namespace idem::cli {

namespace {

[[noreturn]] void no_redis() {
    throw std::invalid_argument("idem: this build of idem has no Redis store (it was built without hiredis)");
}

}  // namespace

forget_result forget_on_redis(const redis_options&, const record_key&, bool) {
    no_redis();
}

std::optional<record_state> inspect_on_redis(const redis_options&, const record_key&, bool) {
    no_redis();
}

}  // namespace idem::cli
