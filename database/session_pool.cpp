#include "session_pool.hpp"

namespace idem::detail {

std::unique_ptr<session_pool> make_session_pool(std::size_t size, std::chrono::milliseconds acquire_timeout) {
    return std::make_unique<session_pool>(
        size, session_pool::policy{.open = [] { return std::make_unique<business_session>(); },
                                   .acquire_timeout = acquire_timeout,
                                   .open_first = false});
}

transaction_runner& ready(business_session& s, const std::function<void(soci::session&)>& open,
                          const transaction_options& options) {
    if (s.runner) return *s.runner;
    if (s.sql.get_backend() != nullptr) s.sql.close();  // an open that failed halfway
    open(s.sql);
    s.runner = std::make_unique<transaction_runner>(s.sql, options);
    return *s.runner;
}

}  // namespace idem::detail
