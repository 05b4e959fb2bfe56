// The Redis ledger a command names with --redis. Compiled from redis_ledger.cpp
// when the build has the Redis store, else from no_redis_ledger.cpp, which refuses.
#pragma once

#include "idem/redis_store.hpp"

namespace idem::cli {

// redis_store::forget on the ledger `options` names: store_error when Redis
// cannot be reached; std::invalid_argument when this build has no Redis store.
[[nodiscard]] forget_result forget_on_redis(const redis_options& options, const record_key& key, bool force);

}  // namespace idem::cli
