// Assertions on errors the PostgreSQL tests share.
#pragma once

#include <doctest/doctest.h>

#include <stdexcept>

#include "idem/error.hpp"

namespace idem::test {

// The store_error `work` throws; fails the test when it throws nothing (and
// lets anything else through, which fails it too).
template <class Work>
store_error store_error_of(Work&& work) {
    try {
        work();
    } catch (const store_error& e) {
        return e;
    }
    FAIL("no store_error was thrown");
    throw std::logic_error("unreachable");
}

}  // namespace idem::test
