// The Redis ledger a command names with --redis. Compiled from redis_ledger.cpp
// when the build has the Redis store, else from no_redis_ledger.cpp, which refuses.
#pragma once

#include <string_view>

#include <fmt/format.h>

#include "database_arg.hpp"
#include "idem/redis_store.hpp"

namespace idem::cli {

// redis_store::forget on the ledger `options` names: store_error when Redis
// cannot be reached; std::invalid_argument when this build has no Redis store.
[[nodiscard]] forget_result forget_on_redis(const redis_options& options, const record_key& key, bool force);
// redis_store::inspect on the ledger `options` names, the same way.
[[nodiscard]] std::optional<record_state> inspect_on_redis(const redis_options& options, const record_key& key,
                                                           bool with_payload);

// Runs `work` on the Redis ledger: a store_error comes out as a command_error
// that says what to check; `names` names the record (by its hashes only).
template <class Work>
auto on_redis_ledger(std::string_view names, Work&& work) {
    try {
        return work();
    } catch (const store_error& e) {
        throw command_error(
            fmt::format("{}; check that Redis is reachable and --redis is right (for {}), then run the command again",
                        e.what(), names));
    }
}

}  // namespace idem::cli
