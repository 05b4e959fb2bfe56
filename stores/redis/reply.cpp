#include "reply.hpp"

#include <algorithm>
#include <charconv>

namespace idem::redis_detail {
namespace {

[[noreturn]] void throw_shape(std::string_view what) {
    throw store_error(store_failure::corrupt_record, "unexpected reply shape: " + std::string(what));
}

[[nodiscard]] long long integer_of(const redisReply& r, std::string_view what) {
    if (r.type == REDIS_REPLY_ERROR) throw_reply_error(r, "server error");
    if (r.type != REDIS_REPLY_INTEGER) throw_shape(what);
    return r.integer;
}

template <typename Number>
[[nodiscard]] std::optional<Number> number(std::string_view text) {
    Number value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// "host:port", "[v6]:port" or "v6:port" (the last colon separates the port).
[[nodiscard]] std::optional<node_address> parse_address(std::string_view text) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const auto port = number<int>(text.substr(colon + 1));
    if (!port || *port < 1 || *port > 65535) return std::nullopt;
    std::string_view host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return node_address{std::string(host), *port};
}

[[noreturn]] void throw_slots(std::string_view what) {
    throw store_error(store_failure::other, "unexpected CLUSTER SLOTS reply: " + std::string(what));
}

[[nodiscard]] std::uint16_t slot_of(const redisReply& r) {
    if (r.type != REDIS_REPLY_INTEGER || r.integer < 0 || r.integer > 16383) throw_slots("a slot out of range");
    return static_cast<std::uint16_t>(r.integer);
}

}  // namespace

std::string_view error_code(const redisReply& r) noexcept {
    const std::string_view text(r.str, r.len);
    return text.substr(0, text.find(' '));
}

store_failure failure_of(std::string_view code) noexcept {
    if (code == "WRONGTYPE") return store_failure::corrupt_record;
    // The server is there but cannot answer yet: loading its data, running a slow script,
    // failing over (READONLY: a master demoted to replica), or a slot moving between cluster nodes.
    if (code == "LOADING" || code == "BUSY" || code == "TRYAGAIN" || code == "MASTERDOWN" || code == "CLUSTERDOWN" ||
        code == "READONLY")
        return store_failure::timeout;
    // A cluster node answered a client that does not follow redirections (a standalone store).
    if (code == "MOVED" || code == "ASK" || code == "CROSSSLOT") return store_failure::unsupported;
    return store_failure::other;
}

void throw_reply_error(const redisReply& r, std::string_view what) {
    const std::string_view code = error_code(r);
    // Redis quotes the arguments it echoes (keys, payloads): keep only the text before them.
    std::string_view text(r.str, r.len);
    text = text.substr(0, std::min<std::size_t>(text.find('\''), 200));
    throw store_error(failure_of(code), std::string(what) + ": " + std::string(text), std::string(code));
}

reservation decode_reserve(const redisReply& r, std::string token, std::string_view fingerprint) {
    if (r.type == REDIS_REPLY_ERROR) throw_reply_error(r, "server error");
    if (r.type != REDIS_REPLY_ARRAY || r.elements == 0 || r.element[0]->type != REDIS_REPLY_INTEGER)
        throw_shape("reserve");
    const long long code = r.element[0]->integer;
    if (code == 2 && r.elements == 2 && r.element[1]->type == REDIS_REPLY_STRING)
        return reservation::completed(std::string(r.element[1]->str, r.element[1]->len));
    if (code == 5 && r.elements == 2 && r.element[1]->type == REDIS_REPLY_STRING) {
        const std::string_view stored(r.element[1]->str, r.element[1]->len);
        if (stored.size() != detail::fingerprint_digest_bytes)
            throw store_error(store_failure::corrupt_record, "the key's tombstone is not one this store wrote");
        return stored == detail::fingerprint_digest(fingerprint) ? reservation::expired()
                                                                 : reservation::fingerprint_mismatch();
    }
    if (r.elements == 1) {
        if (code == 0) return reservation::reserved(std::move(token));
        if (code == 1) return reservation::in_flight();
        if (code == 3) return reservation::fingerprint_mismatch();
        if (code == 4)
            throw store_error(store_failure::corrupt_record, "the key holds a value this store did not write");
    }
    throw_shape("reserve");
}

bool decode_complete(const redisReply& r) {
    const long long stored = integer_of(r, "complete");
    if (stored == 2) throw store_error(store_failure::corrupt_record, "the key holds a value this store did not write");
    if (stored != 0 && stored != 1) throw_shape("complete");
    return stored == 1;
}

bool decode_release(const redisReply& r) {
    const long long removed = integer_of(r, "release");
    if (removed != 0 && removed != 1) throw_shape("release");
    return removed == 1;
}

forget_result decode_forget(const redisReply& r, time_point now) {
    if (r.type == REDIS_REPLY_ERROR) throw_reply_error(r, "server error");
    if (r.type != REDIS_REPLY_ARRAY || r.elements == 0 || r.element[0]->type != REDIS_REPLY_INTEGER)
        throw_shape("forget");
    const long long code = r.element[0]->integer;
    if (code == 0 && r.elements == 1) return {};
    if (code == 3 && r.elements == 1)
        throw store_error(store_failure::corrupt_record, "the key holds something this store did not write; kept");
    if (code == 5 && r.elements == 2 && r.element[1]->type == REDIS_REPLY_INTEGER && r.element[1]->integer >= 0) {
        forget_result out{forget_outcome::tombstone_deleted, {}, true};
        out.record.completed = true;
        out.record.now = now;
        out.record.expires_at = now + std::chrono::milliseconds(r.element[1]->integer);
        return out;
    }
    // A deleted entry's reply says how many tombstones went with it; an older script's does not.
    const bool with_tombstone = code == 1 && r.elements == 4 && r.element[3]->type == REDIS_REPLY_INTEGER;
    if ((code != 1 && code != 2) || (r.elements != 3 && !with_tombstone) || r.element[1]->type != REDIS_REPLY_INTEGER ||
        r.element[2]->type != REDIS_REPLY_INTEGER)
        throw_shape("forget");
    const long long ttl = r.element[1]->integer, bytes = r.element[2]->integer;
    if (ttl < 0 || bytes < -1 || (code == 2 && bytes != -1)) throw_shape("forget");
    forget_result out{code == 1 ? forget_outcome::deleted : forget_outcome::refused_in_flight, {}};
    out.tombstone = with_tombstone && r.element[3]->integer > 0;
    out.record.completed = bytes >= 0;
    out.record.now = now;
    out.record.expires_at = now + std::chrono::milliseconds(ttl);
    out.record.payload_bytes = bytes >= 0 ? static_cast<std::size_t>(bytes) : 0;
    return out;
}

std::optional<record_state> decode_inspect(const redisReply& r, time_point now) {
    if (r.type == REDIS_REPLY_ERROR) throw_reply_error(r, "server error");
    if (r.type != REDIS_REPLY_ARRAY || r.elements == 0 || r.element[0]->type != REDIS_REPLY_INTEGER)
        throw_shape("inspect");
    const long long code = r.element[0]->integer;
    if (code == 0 && r.elements == 1) return std::nullopt;
    if (code == 3 && r.elements == 1)
        throw store_error(store_failure::corrupt_record, "the key holds something this store did not write");
    if (code != 1 || r.elements < 3 || r.elements > 4 || r.element[1]->type != REDIS_REPLY_INTEGER ||
        r.element[2]->type != REDIS_REPLY_INTEGER)
        throw_shape("inspect");
    const long long ttl = r.element[1]->integer, bytes = r.element[2]->integer;
    if (ttl < 0 || bytes < -1 || (bytes == -1 && r.elements != 3)) throw_shape("inspect");
    record_state out;
    out.completed = bytes >= 0;
    out.now = now;
    out.expires_at = now + std::chrono::milliseconds(ttl);
    out.payload_bytes = bytes >= 0 ? static_cast<std::size_t>(bytes) : 0;
    if (r.elements == 4) {
        const redisReply& p = *r.element[3];
        if (p.type != REDIS_REPLY_STRING || static_cast<long long>(p.len) != bytes) throw_shape("inspect");
        out.payload = std::string(p.str, p.len);
    }
    return out;
}

std::optional<redirection> parse_redirection(std::string_view error_text) {
    const auto first_space = error_text.find(' ');
    if (first_space == std::string_view::npos) return std::nullopt;
    const std::string_view code = error_text.substr(0, first_space);
    if (code != "MOVED" && code != "ASK") return std::nullopt;
    const std::string_view rest = error_text.substr(first_space + 1);
    const auto second_space = rest.find(' ');
    if (second_space == std::string_view::npos) return std::nullopt;
    const auto slot = number<int>(rest.substr(0, second_space));
    if (!slot || *slot < 0 || *slot > 16383) return std::nullopt;
    auto to = parse_address(rest.substr(second_space + 1));
    if (!to) return std::nullopt;
    return redirection{code == "ASK", static_cast<std::uint16_t>(*slot), std::move(*to)};
}

std::vector<slot_range> parse_cluster_slots(const redisReply& r, const node_address& asked) {
    if (r.type == REDIS_REPLY_ERROR) throw_reply_error(r, "CLUSTER SLOTS refused");
    if (r.type != REDIS_REPLY_ARRAY) throw_slots("not an array");
    std::vector<slot_range> ranges;
    for (std::size_t i = 0; i < r.elements; ++i) {
        const redisReply& range = *r.element[i];
        if (range.type != REDIS_REPLY_ARRAY || range.elements < 3) throw_slots("a range without a master");
        const std::uint16_t first = slot_of(*range.element[0]);
        const std::uint16_t last = slot_of(*range.element[1]);
        if (last < first) throw_slots("a range that ends before it starts");
        const redisReply& master = *range.element[2];
        if (master.type != REDIS_REPLY_ARRAY || master.elements < 2 || master.element[0]->type != REDIS_REPLY_STRING ||
            master.element[1]->type != REDIS_REPLY_INTEGER || master.element[1]->integer < 1 ||
            master.element[1]->integer > 65535)
            throw_slots("a master without host and port");
        const std::string_view host(master.element[0]->str, master.element[0]->len);
        if (host == "?") continue;
        ranges.push_back(
            {first,
             last,
             {host.empty() ? asked.host : std::string(host), static_cast<int>(master.element[1]->integer)}});
    }
    return ranges;
}

}  // namespace idem::redis_detail
