// idem/transactional_record_store.hpp: a record store that joins your transaction.
//
// The transaction overloads write the record with the business data, so a
// commit lands both and a rollback (or a crash) leaves neither. The plain
// record_store calls are the detached view: each runs on the store's own
// connection in its own short transaction (lease mode, Observe reservations).
//
//   runner.run([&](idem::unit_of_work& tx) {
//       auto r = store.try_reserve(tx, key, fp, std::chrono::minutes(1));
//       if (r.status != idem::reservation_status::reserved) return;
//       move_money(tx.sql());
//       (void)store.complete(tx, key, r.token, fp, receipt, std::chrono::hours(24));
//   });
#pragma once

#include <optional>
#include <string_view>

#include "idem/error.hpp"
#include "idem/export.hpp"
#include "idem/record_store.hpp"
#include "idem/unit_of_work.hpp"

namespace idem {

// What look_up found for a key.
struct IDEM_API record_lookup {
    enum class found {
        nothing,  // no record: the work may run, and insert() writes its record
        answer,   // a live record (or a tombstone) answers: `answer` is completed, fingerprint_mismatch or expired
        reserve,  // a record in flight, or an expired one to take over: reserve first
    };
    found what;
    reservation answer;
};

// A record insert() could not write because a concurrent transaction committed
// the same key first (store_failure::lost_race, transient). The transaction is
// lost; a new one finds the winner's record.
[[nodiscard]] inline bool lost_to_concurrent_record(const store_error& e) noexcept {
    return e.failure() == store_failure::lost_race;
}

class IDEM_API transactional_record_store : public record_store {
public:
    using record_store::complete;
    using record_store::release;
    using record_store::try_reserve;

    // The record_store contract, inside `tx`. A concurrent reserve of the same
    // key waits until `tx` ends, then sees its outcome.
    [[nodiscard]] reservation try_reserve(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                          duration lease);
    [[nodiscard]] bool complete(unit_of_work& tx, const record_key& key, std::string_view token,
                                std::string_view fingerprint, std::string_view payload, duration retention,
                                duration remember = duration::zero());
    [[nodiscard]] bool release(unit_of_work& tx, const record_key& key, std::string_view token);

    // The one-statement form, for a transaction whose owner can roll it back and
    // run it again (idem::database::once): look the key up, run the work, then
    // insert the record. insert() must fail (and with it the transaction) when the
    // key has a record by then: store_error(lost_race), which lost_to_concurrent_record()
    // recognises when a concurrent transaction committed it first. A store that
    // cannot answers found::reserve, and the executor reserves first.
    [[nodiscard]] record_lookup look_up(unit_of_work& tx, const record_key& key, std::string_view fingerprint);
    // `payload`: the completed result, kept for `span`; nullopt keeps the key in flight for `span`.
    // `remember`: as complete()'s, for a completed result only.
    void insert(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                std::optional<std::string_view> payload, duration span, duration remember = duration::zero());

    // The same records through the store's own connections, one transaction per call.
    [[nodiscard]] record_store& detached() noexcept { return *this; }

    [[nodiscard]] store_traits traits() const noexcept override {
        store_traits t;
        t.joins_transactions = true;
        t.remembers = false;  // a store that keeps tombstones says so
        return t;
    }

protected:
    virtual reservation do_try_reserve_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                          duration lease) = 0;
    virtual bool do_complete_in(unit_of_work& tx, const record_key& key, std::string_view token,
                                std::string_view fingerprint, std::string_view payload, duration retention,
                                duration remember) = 0;
    virtual bool do_release_in(unit_of_work& tx, const record_key& key, std::string_view token) = 0;
    virtual record_lookup do_look_up_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint);
    virtual void do_insert_in(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                              std::optional<std::string_view> payload, duration span, duration remember);
};

}  // namespace idem
