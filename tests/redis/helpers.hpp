// Small helpers the Redis tests share.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "idem/error.hpp"
#include "idem/redis_store.hpp"
#include "redis_server.hpp"

namespace idem::test {

// A namespace no other test (or earlier run on a shared server) has used.
inline std::string fresh_namespace() {
    return "redis-test." + detail::new_token().substr(0, 12);
}

// Options for a store on the server this test process shares.
inline redis_options shared_redis_options() {
    const auto at = shared_redis();
    redis_options options;
    options.host = at.host;
    options.port = at.port;
    return options;
}

// The store_error `f` throws; fails the test when it throws none.
template <typename F>
store_error caught_store_error(F&& f) {
    try {
        f();
    } catch (const store_error& e) {
        return e;
    }
    FAIL("no store_error was thrown");
    return store_error(store_failure::other, "unreachable");
}

}  // namespace idem::test
