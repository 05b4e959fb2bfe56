#include "redis_ledger.hpp"

namespace idem::cli {

forget_result forget_on_redis(const redis_options& options, const record_key& key, bool force) {
    redis_store store(options);
    return store.forget(key, force);
}

std::optional<record_state> inspect_on_redis(const redis_options& options, const record_key& key, bool with_payload) {
    redis_store store(options);
    return store.inspect(key, with_payload);
}

}  // namespace idem::cli
