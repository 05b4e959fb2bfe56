// What an exception says, whatever was thrown: for logs and stored errors
// where the exception itself cannot go on.
#pragma once

#include <exception>
#include <string>

namespace idem::detail {

inline std::string what_of(const std::exception_ptr& thrown) {
    try {
        std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
        return "an exception that is no std::exception";
    }
}

}  // namespace idem::detail
