#include <stdexcept>

#include "redis_ledger.hpp"

namespace idem::cli {

forget_result forget_on_redis(const redis_options&, const record_key&, bool) {
    throw std::invalid_argument("idem: this build of idem has no Redis store (it was built without hiredis)");
}

}  // namespace idem::cli
