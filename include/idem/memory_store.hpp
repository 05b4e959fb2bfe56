// idem/memory_store.hpp: a record store in this process's memory.
//
// Atomic across threads, gone with the process: for one instance, tests and
// development. Expired entries are swept a few at a time as the store is used
// (and by purge_expired), never by a pass that stops every thread; so are the
// tombstones of remembered keys (profile_options::remember) once their window ends.
//
//   auto store = std::make_shared<idem::memory_store>();
//   idem::executor exec{store};
#pragma once

#include <atomic>
#include <memory>

#include "idem/export.hpp"
#include "idem/record_store.hpp"
#include "idem/store_admin.hpp"

namespace idem {

class IDEM_API memory_store final : public record_store, public record_inspector {
public:
    explicit memory_store(std::shared_ptr<const clock> time = clock::system());
    ~memory_store() override;
    memory_store(const memory_store&) = delete;
    memory_store& operator=(const memory_store&) = delete;

    // Live and expired-but-unswept entries.
    [[nodiscard]] std::size_t size() const;

    [[nodiscard]] store_traits traits() const noexcept override;
    // record_inspector: `key`'s entry, an expired one too until a sweep or
    // purge removes it. The entry keeps no write time: created_at is zero.
    [[nodiscard]] std::optional<record_state> inspect(const record_key& key, bool with_payload) override;

    // Deletes `key`'s record by hand, by store_admin::forget's rule: a completed
    // or expired entry goes (with its tombstone, as does a tombstone alone); one
    // in flight is kept and reported unless `force`.
    // The entry keeps no write time: the result's created_at is zero.
    [[nodiscard]] forget_result forget(const record_key& key, bool force);

protected:
    reservation do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) override;
    bool do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                     std::string_view payload, duration retention, duration remember) override;
    bool do_release(const record_key& key, std::string_view token) override;
    std::size_t do_purge_expired(std::size_t limit) override;

private:
    struct shard;
    shard& shard_for(const record_key& key) const;

    std::shared_ptr<const clock> clock_;
    std::unique_ptr<shard[]> shards_;
    std::atomic<std::size_t> purge_from_{0};  // the shard where the last purge stopped
};

}  // namespace idem
