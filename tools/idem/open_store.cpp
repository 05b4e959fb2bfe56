// The store a --db URL names, opened through the library's store registry: the
// command knows no store by name, so a build without one says so in the
// registry's words.
#include <chrono>

#include "database_arg.hpp"
#include "idem/store_registry.hpp"

namespace idem::cli {

opened_store open_store(const database_url& url, open_mode mode) {
    store_request request;
    request.pool_size = 1;
    request.access = mode == open_mode::create     ? store_access::create
                     : mode == open_mode::existing ? store_access::existing
                                                   : store_access::read_only;
    // An operator's job may wait for busy writers longer than a request would.
    request.sqlite.busy_timeout = std::chrono::seconds(30);
    return idem::open_store(url, request);
}

}  // namespace idem::cli
