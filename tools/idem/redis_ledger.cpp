#include "redis_ledger.hpp"

namespace idem::cli {

forget_result forget_on_redis(const redis_options& options, const record_key& key, bool force) {
    redis_store store(options);
    return store.forget(key, force);
}

}  // namespace idem::cli
