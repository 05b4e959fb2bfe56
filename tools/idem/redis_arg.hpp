// --redis URL: the Redis ledger a command works on, as redis-cli and most
// clients name it:  redis://[[USER]:PASSWORD@]HOST[:PORT][/DATABASE]
// (a bracketed IPv6 host, %XX escapes in the user and password).
#pragma once

#include <string_view>

#include "idem/redis_store.hpp"

namespace idem::cli {

inline constexpr std::string_view redis_url_form = "redis://[[USER]:PASSWORD@]HOST[:PORT][/DATABASE]";

// std::invalid_argument naming what is wrong, never repeating the URL (it may
// carry a password).
[[nodiscard]] redis_options parse_redis_url(std::string_view text);

}  // namespace idem::cli
