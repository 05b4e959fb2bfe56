// idem/transactional_record_store.hpp: a record store that joins your transaction.
//
// The transaction overloads write the record with the business data, so a
// commit lands both and a rollback (or a crash) leaves neither. The plain
// record_store calls are the detached view: each runs on the store's own
// connection in its own short transaction (lease mode, Observe reservations).
//
//   runner.run([&](idem::transaction& tx) {
//       auto r = store.try_reserve(tx, key, fp, std::chrono::minutes(1));
//       if (r.status != idem::reservation_status::reserved) return;
//       move_money(tx.session());
//       (void)store.complete(tx, key, r.token, fp, receipt, std::chrono::hours(24));
//   });
#pragma once

#include "idem/export.hpp"
#include "idem/record_store.hpp"
#include "idem/transaction.hpp"

namespace idem {

class IDEM_API transactional_record_store : public record_store {
public:
    using record_store::complete;
    using record_store::release;
    using record_store::try_reserve;

    // The record_store contract, inside `tx`. A concurrent reserve of the same
    // key waits until `tx` ends, then sees its outcome.
    [[nodiscard]] reservation try_reserve(transaction& tx, const record_key& key, std::string_view fingerprint,
                                          duration lease);
    [[nodiscard]] bool complete(transaction& tx, const record_key& key, std::string_view token,
                                std::string_view fingerprint, std::string_view payload, duration retention);
    [[nodiscard]] bool release(transaction& tx, const record_key& key, std::string_view token);

    // The same records through the store's own connections, one transaction per call.
    [[nodiscard]] record_store& detached() noexcept { return *this; }

    [[nodiscard]] store_traits traits() const noexcept override {
        store_traits t;
        t.joins_transactions = true;
        return t;
    }

protected:
    virtual reservation do_try_reserve_in(transaction& tx, const record_key& key, std::string_view fingerprint,
                                          duration lease) = 0;
    virtual bool do_complete_in(transaction& tx, const record_key& key, std::string_view token,
                                std::string_view fingerprint, std::string_view payload, duration retention) = 0;
    virtual bool do_release_in(transaction& tx, const record_key& key, std::string_view token) = 0;
};

}  // namespace idem
