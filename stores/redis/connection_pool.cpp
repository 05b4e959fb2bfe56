#include "connection_pool.hpp"

namespace idem::redis_detail {
namespace {

std::chrono::milliseconds longest_wait(const redis_options& o) {
    if (o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0) return std::chrono::milliseconds(0);
    return o.connect_timeout + o.command_timeout;
}

}  // namespace

connection_pool::connection_pool(const redis_options& options)
    : lending_pool(options.pool_size, {.open = [options] { return connection::open(options); },
                                       .usable = [](connection& c) { return c.idle_and_open(); },
                                       .reusable = [](connection& c) { return c.healthy(); },
                                       .acquire_timeout = longest_wait(options),
                                       .open_first = false}) {}

}  // namespace idem::redis_detail
