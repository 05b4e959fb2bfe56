#include "router.hpp"

#include <algorithm>
#include <optional>
#include <thread>

#include "internal/retry_schedule.hpp"

namespace idem::redis_detail {
namespace {

using clock = std::chrono::steady_clock;

// The slot map is reloaded at most this often, however many MOVED replies arrive.
constexpr auto refresh_interval = std::chrono::milliseconds(100);
// A call that is redirected more often than this while its slot moves gives up (transient).
constexpr int max_redirects = 16;

// EVALSHA, then EVAL with the body when this node does not know the script yet; each
// preceded by ASKING when `asking` (it admits only the command right after it).
reply send_script(connection& c, std::span<std::string_view> args, const script& s, bool asking) {
    const auto ask = [&] {
        if (!asking) return;
        static constexpr std::array<std::string_view, 1> command{"ASKING"};
        const reply ok = c.command(command);
        if (ok->type == REDIS_REPLY_ERROR) throw_reply_error(*ok, "ASKING refused");
    };
    ask();
    reply r = c.command(args);
    if (r->type == REDIS_REPLY_ERROR && error_code(*r) == "NOSCRIPT") {
        args[0] = "EVAL";
        args[1] = s.body;
        ask();
        r = c.command(args);
        args[0] = "EVALSHA";
        args[1] = s.sha1;
    }
    // A master demoted to replica (a Sentinel failover): a new connection may reach the new master.
    if (r->type == REDIS_REPLY_ERROR && error_code(*r) == "READONLY") c.discard();
    return r;
}

redis_options options_for(const redis_options& options, const node_address& address) {
    redis_options o = options;
    o.host = address.host;
    o.port = address.port;
    return o;
}

}  // namespace

router::router(redis_options options) : options_(std::move(options)) {
    owner_.fill(no_node);
    if (!options_.cluster) {
        nodes_.emplace_back(new node{{options_.host, options_.port}, connection_pool(options_)});
        return;
    }
    seeds_.push_back({options_.host, options_.port});
    for (const auto& seed : options_.cluster_seeds) seeds_.push_back({seed.host, seed.port});
}

router::~router() = default;

reply router::run(const script& s, std::string_view key, std::span<const std::string_view> argv) {
    return run(s, std::span<const std::string_view>(&key, 1), argv);
}

reply router::run(const script& s, std::span<const std::string_view> keys, std::span<const std::string_view> argv) {
    static constexpr std::string_view key_counts[] = {"0", "1", "2", "3"};
    std::array<std::string_view, 12> buffer{"EVALSHA", s.sha1};
    if (keys.empty() || keys.size() >= std::size(key_counts) || keys.size() + argv.size() > buffer.size() - 3)
        throw std::logic_error("idem: too many script keys or arguments");
    buffer[2] = key_counts[keys.size()];
    std::copy(keys.begin(), keys.end(), buffer.begin() + 3);
    std::copy(argv.begin(), argv.end(), buffer.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));
    const std::span<std::string_view> args(buffer.data(), keys.size() + argv.size() + 3);
    if (options_.cluster) return run_clustered(args, s, hash_slot(keys.front()));

    const auto c = nodes_.front()->pool.acquire();
    reply r = send_script(*c, args, s, false);
    if (r->type == REDIS_REPLY_ERROR) throw_reply_error(*r, "server error");
    return r;
}

reply router::run_clustered(std::span<std::string_view> args, const script& s, std::uint16_t slot) {
    // While a replica takes over: short waits, within the call's deadline (none when unbounded).
    detail::retrying retry({.first = std::chrono::milliseconds(5),
                            .ceiling = std::chrono::milliseconds(200),
                            .budget = options_.command_timeout});
    node* ask_to = nullptr;
    int redirects = 0;
    for (;;) {
        route r;
        std::optional<connection_pool::lease> c;
        try {
            if (ask_to != nullptr) {
                r.to = ask_to;
            } else {
                r = route_of(slot);
                if (r.to == nullptr) {
                    refresh(r.version);
                    r = route_of(slot);
                }
            }
            if (r.to == nullptr)
                throw store_error(store_failure::timeout, "no master serves slot " + std::to_string(slot),
                                  "CLUSTERDOWN");
            c.emplace(r.to->pool.acquire());
        } catch (const store_error& e) {
            // Nothing was sent: a master is down or none serves the slot, as while a replica takes over.
            if (!e.is_transient() || !retry.wait()) throw;
            ask_to = nullptr;
            try {
                refresh(r.version);
            } catch (const store_error&) {
                // no node answered yet: the next try says so, or succeeds
            }
            continue;
        }

        const bool asking = ask_to != nullptr;
        ask_to = nullptr;
        reply answer;
        try {
            answer = send_script(**c, args, s, asking);
        } catch (const store_error& e) {
            // Sent without a reply: the outcome is unknown, so it is not resent. The map may be stale.
            if (e.is_connection_lost()) {
                try {
                    refresh(r.version);
                } catch (const store_error&) {
                    // reported by the next call
                }
            }
            throw;
        }
        if (answer->type != REDIS_REPLY_ERROR) return answer;

        const std::string_view code = error_code(*answer);
        if (code == "MOVED" || code == "ASK") {
            auto redirect = parse_redirection({answer->str, answer->len});
            if (!redirect) throw_reply_error(*answer, "server error");
            if (++redirects > max_redirects)
                throw store_error(
                    store_failure::timeout,
                    "slot " + std::to_string(slot) + " kept moving: " + std::to_string(max_redirects) + " redirections",
                    std::string(code));
            if (redirect->to.host.empty()) redirect->to.host = r.to->address.host;
            if (redirect->ask)
                ask_to = &node_at(redirect->to);
            else
                moved(redirect->slot, redirect->to);
            continue;
        }
        // A slot in the middle of a move, or the cluster electing a new master.
        if ((code == "TRYAGAIN" || code == "CLUSTERDOWN") && retry.wait()) continue;
        throw_reply_error(*answer, "server error");
    }
}

void router::ping() {
    static constexpr std::array<std::string_view, 1> command{"PING"};
    const auto check = [](connection_pool& pool) {
        const auto c = pool.acquire();
        const reply r = c->command(command);
        if (r->type == REDIS_REPLY_ERROR) throw_reply_error(*r, "server error");
        if (r->type != REDIS_REPLY_STATUS) throw store_error(store_failure::corrupt_record, "unexpected reply shape");
    };
    if (!options_.cluster) return check(nodes_.front()->pool);

    refresh(0, true);
    std::vector<node*> masters;
    {
        std::shared_lock lock(map_mutex_);
        for (const auto index : owner_)
            if (index != no_node && std::find(masters.begin(), masters.end(), nodes_[index].get()) == masters.end())
                masters.push_back(nodes_[index].get());
    }
    if (masters.empty()) throw store_error(store_failure::timeout, "no master serves any slot", "CLUSTERDOWN");
    for (node* master : masters) check(master->pool);
}

router::route router::route_of(std::uint16_t slot) {
    std::shared_lock lock(map_mutex_);
    const std::uint16_t index = owner_[slot];
    return {index == no_node ? nullptr : nodes_[index].get(), version_};
}

std::uint16_t router::index_of(const node_address& address) {
    const auto find = [&]() -> std::optional<std::uint16_t> {
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (nodes_[i]->address == address) return static_cast<std::uint16_t>(i);
        return std::nullopt;
    };
    {
        std::shared_lock lock(map_mutex_);
        if (const auto i = find()) return *i;
    }
    std::unique_lock lock(map_mutex_);
    if (const auto i = find()) return *i;
    if (nodes_.size() >= no_node) throw store_error(store_failure::other, "too many cluster nodes");
    nodes_.emplace_back(new node{address, connection_pool(options_for(options_, address))});
    return static_cast<std::uint16_t>(nodes_.size() - 1);
}

router::node& router::node_at(const node_address& address) {
    const std::uint16_t index = index_of(address);
    std::shared_lock lock(map_mutex_);
    return *nodes_[index];
}

void router::refresh(std::uint64_t seen, bool force, const node_address* first) {
    std::lock_guard one_at_a_time(refresh_mutex_);
    std::vector<node_address> candidates;
    if (first != nullptr) candidates.push_back(*first);
    {
        std::shared_lock lock(map_mutex_);
        if (!force && (version_ != seen || clock::now() - refreshed_at_ < refresh_interval)) return;
        for (const auto& n : nodes_) candidates.push_back(n->address);
    }
    candidates.insert(candidates.end(), seeds_.begin(), seeds_.end());
    for (auto i = candidates.begin(); i != candidates.end(); ++i)
        candidates.erase(std::remove(i + 1, candidates.end(), *i), candidates.end());
    refreshed_at_ = clock::now();

    static constexpr std::array<std::string_view, 2> command{"CLUSTER", "SLOTS"};
    std::optional<store_error> last;
    for (const auto& address : candidates) {
        std::vector<slot_range> ranges;
        try {
            const auto c = node_at(address).pool.acquire();
            ranges = parse_cluster_slots(*c->command(command), address);
        } catch (const store_error& e) {
            last = e;
            continue;
        }
        if (ranges.empty()) continue;  // a node that has not joined the cluster yet
        std::vector<std::uint16_t> owners;
        for (const auto& range : ranges) owners.push_back(index_of(range.master));
        std::unique_lock lock(map_mutex_);
        owner_.fill(no_node);
        for (std::size_t i = 0; i < ranges.size(); ++i)
            std::fill(owner_.begin() + ranges[i].first, owner_.begin() + ranges[i].last + 1, owners[i]);
        ++version_;
        return;
    }
    if (last) throw *last;
    throw store_error(store_failure::timeout, "no cluster node serves any slot", "CLUSTERDOWN");
}

void router::moved(std::uint16_t slot, const node_address& to) {
    const std::uint16_t index = index_of(to);
    std::uint64_t version = 0;
    {
        std::unique_lock lock(map_mutex_);
        owner_[slot] = index;
        version = ++version_;
    }
    // The other slots that moved with it (a failover moves thousands) are reloaded at once.
    try {
        refresh(version, false, &to);
    } catch (const store_error&) {
        // this slot's owner is known; the rest follow their own MOVED replies
    }
}

}  // namespace idem::redis_detail
