// A memory store that can be made to fail like a store whose server went away.
#pragma once

#include <atomic>

#include "idem/error.hpp"
#include "idem/memory_store.hpp"

namespace idem::test {

class switchable_store final : public record_store {
public:
    explicit switchable_store(std::shared_ptr<const idem::clock> c = idem::clock::system()) : inner_(std::move(c)) {}
    std::atomic<bool> failing{false};

    [[nodiscard]] store_traits traits() const noexcept override { return inner_.traits(); }

protected:
    reservation do_try_reserve(const record_key& k, std::string_view fp, duration lease) override {
        fail_if_down();
        return inner_.try_reserve(k, fp, lease);
    }
    bool do_complete(const record_key& k, std::string_view t, std::string_view fp, std::string_view p, duration r,
                     duration remember) override {
        fail_if_down();
        return inner_.complete(k, t, fp, p, r, remember);
    }
    bool do_release(const record_key& k, std::string_view t) override {
        fail_if_down();
        return inner_.release(k, t);
    }
    std::size_t do_purge_expired(std::size_t limit) override { return inner_.purge_expired(limit); }

private:
    void fail_if_down() const {
        if (failing) throw store_error(store_failure::connection_lost, "idem: test store is down");
    }
    memory_store inner_;
};

}  // namespace idem::test
