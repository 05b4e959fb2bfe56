#include "idem/store_admin.hpp"

#include "idem/error.hpp"

namespace idem {

rewrite_progress store_admin::rewrite_payloads(const std::optional<std::array<std::byte, 16>>& after, std::size_t limit,
                                               const payload_rewrite& rewrite) {
    (void)after, (void)limit, (void)rewrite;
    throw store_error(store_failure::unsupported, "idem: this store does not rewrite stored payloads (reseal)");
}

}  // namespace idem
