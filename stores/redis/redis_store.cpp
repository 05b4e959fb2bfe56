#include "idem/redis_store.hpp"

#include <array>
#include <charconv>
#include <stdexcept>

#include "internal/crypto.hpp"
#include "router.hpp"
#include "scripts.hpp"

namespace idem {
namespace {

void check_options(const redis_options& o) {
    std::vector<std::string> problems;
    auto problem = [&problems](std::string_view text) { problems.emplace_back(text); };
    if (o.unix_socket.empty()) {
        if (o.host.empty()) problem("host is empty (set host or unix_socket)");
        if (o.port < 1 || o.port > 65535) problem("port must be 1 to 65535");
    }
    if (o.host.find('\0') != std::string::npos || o.unix_socket.find('\0') != std::string::npos)
        problem("host and unix_socket must not contain NUL");
    if (!o.user.empty() && o.password.empty()) problem("user is set without a password");
    if (o.database < 0) problem("database must not be negative");
    if (o.connect_timeout.count() < 0) problem("connect_timeout must not be negative");
    if (o.command_timeout.count() < 0) problem("command_timeout must not be negative");
    // Compared in milliseconds: nanoseconds cannot hold milliseconds::max().
    constexpr auto longest = std::chrono::floor<std::chrono::milliseconds>(max_duration);
    if (o.connect_timeout > longest || o.command_timeout > longest)
        problem("connect_timeout and command_timeout must be at most 100 years (0: no limit)");
    if (o.pool_size < 1 || o.pool_size > 1024) problem("pool_size must be 1 to 1024");
    if (o.cluster) {
        if (!o.unix_socket.empty()) problem("cluster needs host and port, not unix_socket");
        if (o.database != 0) problem("cluster has only database 0");
    }
    if (!o.cluster && !o.cluster_seeds.empty()) problem("cluster_seeds is set without cluster");
    for (const auto& seed : o.cluster_seeds) {
        if (seed.host.empty() || seed.host.find('\0') != std::string::npos)
            problem("cluster_seeds: a host is empty or contains NUL");
        if (seed.port < 1 || seed.port > 65535) problem("cluster_seeds: port must be 1 to 65535");
    }
    if (!problems.empty()) throw options_error(std::move(problems));
}

// A TTL argument, formatted without allocating.
class milliseconds_arg {
public:
    explicit milliseconds_arg(duration span) noexcept {
        const auto end =
            std::to_chars(text_.data(), text_.data() + text_.size(), redis_detail::pexpire_milliseconds(span)).ptr;
        size_ = static_cast<std::size_t>(end - text_.data());
    }
    [[nodiscard]] std::string_view view() const noexcept { return {text_.data(), size_}; }

private:
    std::array<char, 24> text_{};
    std::size_t size_ = 0;
};

// The key of `key`'s tombstone: prefix, "t{tag}" and the digest's first 16 bytes
// in hex. The tag puts it in the slot of the entry's key (`storage_key`), so
// that one script changes both on Redis Cluster too; no key text, like the
// SQL stores' tombstones.
std::string tombstone_key(std::string_view prefix, std::string_view storage_key, const record_key& key) {
    const auto digest = key.digest();
    std::string out(prefix);
    out += "t{";
    out += redis_detail::tag_for_slot(redis_detail::hash_slot(storage_key));
    out += '}';
    out += detail::hex(std::span(digest).first(detail::fingerprint_digest_bytes));
    return out;
}

// Store errors name the operation and the key hash, never the key.
template <typename F>
auto in_context(std::string_view operation, const record_key* key, F&& f) {
    try {
        return f();
    } catch (const store_error& e) {
        std::string where = "idem: redis " + std::string(operation);
        if (key != nullptr) where += " (key " + key->key_hash() + ")";
        throw store_error(e.failure(), where + ": " + e.what(), e.native_code());
    }
}

}  // namespace

redis_store::redis_store(redis_options options) : prefix_(options.key_prefix) {
    check_options(options);
    router_ = std::make_unique<redis_detail::router>(std::move(options));
}

redis_store::~redis_store() = default;

store_traits redis_store::traits() const noexcept {
    return {.atomic_reserve = true,
            .joins_transactions = false,
            .server_clock = true,
            .self_expiring = true,
            .remembers = true};
}

void redis_store::ping() {
    in_context("ping", nullptr, [&] { router_->ping(); });
}

reservation redis_store::do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    std::string token = detail::new_token();
    const std::string storage_key = key.to_storage_key(prefix_);
    const std::string tombstone = tombstone_key(prefix_, storage_key, key);
    const milliseconds_arg ms(lease);
    return in_context("reserve", &key, [&] {
        const std::array<std::string_view, 2> keys{storage_key, tombstone};
        const std::array<std::string_view, 3> argv{token, fingerprint, ms.view()};
        return redis_detail::decode_reserve(*router_->run(redis_detail::reserve_script(), keys, argv), std::move(token),
                                            fingerprint);
    });
}

bool redis_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                              std::string_view payload, duration retention, duration remember) {
    const std::string storage_key = key.to_storage_key(prefix_);
    const milliseconds_arg ms(retention);
    if (remember <= duration::zero()) {
        return in_context("complete", &key, [&] {
            const std::array<std::string_view, 4> argv{token, fingerprint, payload, ms.view()};
            return redis_detail::decode_complete(*router_->run(redis_detail::complete_script(), storage_key, argv));
        });
    }
    // The tombstone is written with the result, and outlives it by its own TTL.
    const std::string tombstone = tombstone_key(prefix_, storage_key, key);
    const std::string digest = detail::fingerprint_digest(fingerprint);
    const milliseconds_arg window(remember);
    return in_context("complete", &key, [&] {
        const std::array<std::string_view, 2> keys{storage_key, tombstone};
        const std::array<std::string_view, 6> argv{token, fingerprint, payload, ms.view(), digest, window.view()};
        return redis_detail::decode_complete(*router_->run(redis_detail::complete_script(), keys, argv));
    });
}

bool redis_store::do_release(const record_key& key, std::string_view token) {
    const std::string storage_key = key.to_storage_key(prefix_);
    return in_context("release", &key, [&] {
        const std::array<std::string_view, 1> argv{token};
        return redis_detail::decode_release(*router_->run(redis_detail::release_script(), storage_key, argv));
    });
}

std::optional<record_state> redis_store::inspect(const record_key& key, bool with_payload) {
    const std::string storage_key = key.to_storage_key(prefix_);
    std::optional<record_state> r = in_context("inspect", &key, [&] {
        const std::array<std::string_view, 1> argv{with_payload ? "1" : "0"};
        return redis_detail::decode_inspect(*router_->run(redis_detail::inspect_script(), storage_key, argv),
                                            clock::system()->now());
    });
    if (r) r->name_space = key.name_space();
    return r;
}

forget_result redis_store::forget(const record_key& key, bool force) {
    const std::string storage_key = key.to_storage_key(prefix_);
    const std::string tombstone = tombstone_key(prefix_, storage_key, key);
    forget_result r = in_context("forget", &key, [&] {
        const std::array<std::string_view, 2> keys{storage_key, tombstone};
        const std::array<std::string_view, 1> argv{force ? "1" : "0"};
        return redis_detail::decode_forget(*router_->run(redis_detail::forget_script(), keys, argv),
                                           clock::system()->now());
    });
    if (r.outcome != forget_outcome::not_found) r.record.name_space = key.name_space();
    return r;
}

std::size_t redis_store::do_purge_expired(std::size_t /*limit*/) {
    return 0;
}

}  // namespace idem
