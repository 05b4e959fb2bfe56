#include "idem/purge.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "internal/batch_rest.hpp"

namespace idem {

purge_result purge(store_admin& store, const purge_options& options) {
    return purge_batches([&](std::size_t limit, duration older_than) { return store.purge_batch(limit, older_than); },
                         options);
}

purge_result purge_batches(const std::function<std::size_t(std::size_t, duration)>& delete_batch,
                           const purge_options& options) {
    using steady = std::chrono::steady_clock;
    if (options.batch == 0) throw std::invalid_argument("idem: the purge batch must be positive");
    if (options.max_rows && *options.max_rows == 0)
        throw std::invalid_argument("idem: purge max_rows must be positive");
    if (options.older_than < duration::zero())
        throw std::invalid_argument("idem: purge older_than must not be negative");
    const std::size_t bound = options.max_rows.value_or(std::numeric_limits<std::size_t>::max());
    const auto start = steady::now();
    purge_result r;
    while (r.deleted < bound) {
        const std::size_t want = std::min(options.batch, bound - r.deleted);
        const auto batch_start = steady::now();
        const std::size_t n = delete_batch(want, options.older_than);
        ++r.batches;
        r.deleted += n;
        r.elapsed = steady::now() - start;
        if (options.progress) options.progress({r.deleted, r.batches, r.elapsed});
        if (n < want) break;
        if (r.deleted == bound) {
            r.stopped_at_max_rows = true;
            break;
        }
        if (options.rest_between_batches) detail::rest_after_batch(batch_start);
    }
    r.elapsed = steady::now() - start;
    return r;
}

}  // namespace idem
