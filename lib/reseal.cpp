#include "idem/reseal.hpp"

#include <optional>
#include <stdexcept>
#include <string>

#include "internal/batch_rest.hpp"
#include "internal/crypto.hpp"

namespace idem {

reseal_result reseal(store_admin& store, const encryption_keys& keys, const reseal_options& options) {
    using steady = std::chrono::steady_clock;
    if (options.batch == 0) throw std::invalid_argument("idem: the reseal batch must be positive");
    // A sealed payload is bound to its record's key hash (the executor's context).
    const payload_rewrite seal_again = [&](const stored_payload& p) -> std::optional<std::string> {
        if (encryption_keys::sealed_with(p.payload) == keys.sealing_key_id()) return std::nullopt;
        const std::string_view context{reinterpret_cast<const char*>(p.key_hash.data()), p.key_hash.size()};
        try {
            return keys.seal(keys.open(p.payload, context), context);
        } catch (const payload_unreadable& e) {
            std::string why = e.what();
            if (why.starts_with("idem: ")) why.erase(0, 6);
            throw payload_unreadable(
                e.why(), "idem: the record with key hash " + detail::hex(p.key_hash) + " cannot be resealed: " + why);
        }
    };
    const auto start = steady::now();
    reseal_result r;
    std::optional<std::array<std::byte, 16>> after;
    do {
        const auto batch_start = steady::now();
        const rewrite_progress batch = store.rewrite_payloads(after, options.batch, seal_again);
        ++r.batches;
        r.read += batch.read;
        r.resealed += batch.rewritten;
        r.elapsed = steady::now() - start;
        if (options.progress) options.progress(r);
        after = batch.next;
        if (after && options.rest_between_batches) detail::rest_after_batch(batch_start);
    } while (after);
    return r;
}

}  // namespace idem
