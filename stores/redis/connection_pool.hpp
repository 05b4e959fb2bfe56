// The connections a redis_store shares between threads: the library's one
// pool (internal/lending_pool.hpp) with Redis's rules. An idle connection
// still open is lent, else a new one while fewer than pool_size are open, else
// a caller waits for one to come back: store_error(connection_lost) when it
// cannot connect, store_error(timeout) when every connection stays busy past
// connect_timeout + command_timeout. A connection closed while idle (a server
// restart) is dropped before anything is sent on it; a broken one is not kept.
#pragma once

#include "connection.hpp"
#include "internal/lending_pool.hpp"

namespace idem::redis_detail {

class connection_pool : public detail::lending_pool<connection> {
public:
    explicit connection_pool(const redis_options& options);
};

}  // namespace idem::redis_detail
