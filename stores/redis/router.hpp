// Where the Redis store's commands go: the one server, or in Redis Cluster the master
// that owns the key's hash slot, following the cluster's redirections.
//
// The slot map is loaded on first use (CLUSTER SLOTS from a known node, then the seeds).
// MOVED updates the slot and reloads the map (at most every refresh_interval); ASK sends
// ASKING then the command once to the named node; TRYAGAIN, CLUSTERDOWN and a node that
// refuses connections are retried with backoff until command_timeout has passed since the
// call began. A command that was sent and got no reply is never resent: its outcome is
// unknown, so it is a store_error connection_lost, as on a single server.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string_view>
#include <vector>

#include "connection_pool.hpp"
#include "hash_slot.hpp"
#include "reply.hpp"
#include "scripts.hpp"

namespace idem::redis_detail {

class router {
public:
    explicit router(redis_options options);
    ~router();
    router(const router&) = delete;
    router& operator=(const router&) = delete;

    // Runs `s` on `key` with `argv` by EVALSHA (EVAL once where the node lacks the script).
    // Throws store_error for an error reply, so the reply returned is the script's.
    [[nodiscard]] reply run(const script& s, std::string_view key, std::span<const std::string_view> argv);
    // The same on several keys, all in the first one's slot (in a cluster).
    [[nodiscard]] reply run(const script& s, std::span<const std::string_view> keys,
                            std::span<const std::string_view> argv);
    // Standalone: PING. Cluster: loads the slot map, then PINGs every master.
    void ping();

private:
    struct node {
        node_address address;
        connection_pool pool;
    };
    struct route {
        node* to = nullptr;  // none: no master serves the slot (yet)
        std::uint64_t version = 0;
    };
    static constexpr std::uint16_t no_node = 0xffff;

    [[nodiscard]] reply run_clustered(std::span<std::string_view> args, const script& s, std::uint16_t slot);
    [[nodiscard]] route route_of(std::uint16_t slot);
    // The node at `address`, added (with its own pool) when new.
    [[nodiscard]] std::uint16_t index_of(const node_address& address);
    [[nodiscard]] node& node_at(const node_address& address);
    // Reloads the slot map, asking `first` first, then every known node and seed, unless
    // (without `force`) it changed since `seen` or was reloaded within refresh_interval.
    void refresh(std::uint64_t seen, bool force = false, const node_address* first = nullptr);
    // A MOVED reply: `slot` now belongs to `to`; the rest of the map is reloaded too.
    void moved(std::uint16_t slot, const node_address& to);

    const redis_options options_;
    std::vector<node_address> seeds_;

    std::shared_mutex map_mutex_;
    std::vector<std::unique_ptr<node>> nodes_;  // only grows: leases and routes point into it
    std::array<std::uint16_t, slot_count> owner_{};
    std::uint64_t version_ = 0;

    std::mutex refresh_mutex_;
    std::chrono::steady_clock::time_point refreshed_at_{};
};

}  // namespace idem::redis_detail
