// A write the MariaDB store leaves to COMMIT on the fast path (fast_path.hpp):
// its statements with their values already inlined as hexadecimal literals (a
// compound statement takes no bound values), sent by the dialect's connection
// with COMMIT in one compound statement (mariadb_connection.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sql/fast_path.hpp"

namespace idem::detail::mariadb {

struct deferred_write final : deferred_statement {
    std::vector<std::string> statements;
    std::string_view what;  // names the operation in errors
    // The store_error(lost_race) message when the first statement meets a duplicate key.
    std::string lost_race;
};

}  // namespace idem::detail::mariadb
