#include "idem/redis_store.hpp"

#include <array>
#include <charconv>
#include <stdexcept>

#include "connection_pool.hpp"
#include "scripts.hpp"

namespace idem {
namespace {

using redis_detail::reply;
using redis_detail::script;

void check_options(const redis_options& o) {
    std::string problems;
    auto problem = [&problems](std::string_view text) {
        problems += problems.empty() ? " " : "; ";
        problems += text;
    };
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
    if (!problems.empty()) throw std::invalid_argument("idem: invalid redis options:" + problems);
}

// A TTL argument, formatted without allocating.
class milliseconds_arg {
public:
    explicit milliseconds_arg(duration span) noexcept {
        const auto end = std::to_chars(text_.data(), text_.data() + text_.size(),
                                       redis_detail::pexpire_milliseconds(span)).ptr;
        size_ = static_cast<std::size_t>(end - text_.data());
    }
    [[nodiscard]] std::string_view view() const noexcept { return {text_.data(), size_}; }

private:
    std::array<char, 24> text_{};
    std::size_t size_ = 0;
};

// Runs a script by its SHA; when the server does not know it (first use, a restart,
// SCRIPT FLUSH) runs it once by its body, which also caches it for every later EVALSHA.
template <std::size_t N>
reply run(redis_detail::connection_pool& pool, const script& s, std::string_view key,
          const std::array<std::string_view, N>& argv) {
    std::array<std::string_view, N + 4> args{"EVALSHA", s.sha1, "1", key};
    std::copy(argv.begin(), argv.end(), args.begin() + 4);
    const auto c = pool.acquire();
    reply r = c->command(args);
    if (r->type == REDIS_REPLY_ERROR && redis_detail::error_code(*r) == "NOSCRIPT") {
        args[0] = "EVAL";
        args[1] = s.body;
        r = c->command(args);
    }
    if (r->type == REDIS_REPLY_ERROR) redis_detail::throw_reply_error(*r, "server error");
    return r;
}

[[noreturn]] void throw_corrupt(std::string_view what) {
    throw store_error(store_failure::corrupt_record, std::string(what));
}

[[nodiscard]] long long integer_reply(const reply& r) {
    if (r->type != REDIS_REPLY_INTEGER) throw_corrupt("unexpected reply shape");
    return r->integer;
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
    pool_ = std::make_unique<redis_detail::connection_pool>(std::move(options));
}

redis_store::~redis_store() = default;

store_traits redis_store::traits() const noexcept {
    return {.atomic_reserve = true, .joins_transactions = false, .server_clock = true, .self_expiring = true};
}

void redis_store::ping() {
    in_context("ping", nullptr, [&] {
        const auto c = pool_->acquire();
        const std::array<std::string_view, 1> args{"PING"};
        const reply r = c->command(args);
        if (r->type == REDIS_REPLY_ERROR) redis_detail::throw_reply_error(*r, "server error");
        if (r->type != REDIS_REPLY_STATUS) throw_corrupt("unexpected reply shape");
    });
}

reservation redis_store::do_try_reserve(const record_key& key, std::string_view fingerprint, duration lease) {
    std::string token = detail::new_token();
    const std::string storage_key = key.to_storage_key(prefix_);
    const milliseconds_arg ms(lease);
    return in_context("reserve", &key, [&] {
        const reply r = run(*pool_, redis_detail::reserve_script(), storage_key,
                            std::array<std::string_view, 3>{token, fingerprint, ms.view()});
        if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->element[0]->type != REDIS_REPLY_INTEGER)
            throw_corrupt("unexpected reply shape");
        const long long code = r->element[0]->integer;
        if (code == 2 && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING)
            return reservation::completed(std::string(r->element[1]->str, r->element[1]->len));
        if (r->elements == 1) {
            if (code == 0) return reservation::reserved(std::move(token));
            if (code == 1) return reservation::in_flight();
            if (code == 3) return reservation::fingerprint_mismatch();
            if (code == 4) throw_corrupt("the key holds a value this store did not write");
        }
        throw_corrupt("unexpected reply shape");
    });
}

bool redis_store::do_complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                              std::string_view payload, duration retention) {
    const std::string storage_key = key.to_storage_key(prefix_);
    const milliseconds_arg ms(retention);
    return in_context("complete", &key, [&] {
        const long long stored = integer_reply(run(*pool_, redis_detail::complete_script(), storage_key,
                                                   std::array<std::string_view, 4>{token, fingerprint, payload,
                                                                                   ms.view()}));
        if (stored == 2) throw_corrupt("the key holds a value this store did not write");
        if (stored != 0 && stored != 1) throw_corrupt("unexpected reply shape");
        return stored == 1;
    });
}

bool redis_store::do_release(const record_key& key, std::string_view token) {
    const std::string storage_key = key.to_storage_key(prefix_);
    return in_context("release", &key, [&] {
        const long long removed = integer_reply(
            run(*pool_, redis_detail::release_script(), storage_key, std::array<std::string_view, 1>{token}));
        if (removed != 0 && removed != 1) throw_corrupt("unexpected reply shape");
        return removed == 1;
    });
}

std::size_t redis_store::do_purge_expired(std::size_t /*limit*/) { return 0; }

}  // namespace idem
