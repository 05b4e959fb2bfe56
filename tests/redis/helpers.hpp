// Small helpers the Redis test binaries share.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "idem/error.hpp"
#include "idem/record_store.hpp"

namespace idem::test {

// A namespace no other test (or earlier run on a shared server) has used.
inline std::string fresh_namespace() { return "redis-test." + detail::new_token().substr(0, 12); }

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
