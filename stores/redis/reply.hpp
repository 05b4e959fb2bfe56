// What the Redis store makes of a reply: plain functions of a parsed reply, no connection needed.
//
// Each throws idem::store_error for a reply that is an error or has an unexpected shape,
// so a malformed reply, whatever its bytes, is a typed error and never undefined behaviour.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.hpp"
#include "idem/record_store.hpp"
#include "idem/store_admin.hpp"

namespace idem::redis_detail {

// The first word of an error reply: "NOSCRIPT", "WRONGTYPE", "MOVED", "ERR"...
[[nodiscard]] std::string_view error_code(const redisReply& r) noexcept;
// What an error code means to a caller (TRYAGAIN, CLUSTERDOWN, READONLY: timeout, transient).
[[nodiscard]] store_failure failure_of(std::string_view code) noexcept;
// Throws the store_error an error reply stands for; `what` says what was refused.
[[noreturn]] void throw_reply_error(const redisReply& r, std::string_view what);

// The reserve script's answer; `token` is the one the script was given.
// `fingerprint`: the reserve's, which a tombstone's digest is compared with.
[[nodiscard]] reservation decode_reserve(const redisReply& r, std::string token, std::string_view fingerprint = {});
// The complete script's answer: stored or refused.
[[nodiscard]] bool decode_complete(const redisReply& r);
// The release script's answer: removed or refused.
[[nodiscard]] bool decode_release(const redisReply& r);
// The forget script's answer, its times read against `now`; the namespace is the caller's to fill.
[[nodiscard]] forget_result decode_forget(const redisReply& r, time_point now);
// The inspect script's answer, its times read against `now`; the namespace is the caller's to fill.
[[nodiscard]] std::optional<record_state> decode_inspect(const redisReply& r, time_point now);

struct node_address {
    std::string host;  // empty: the node that sent the reply
    int port = 0;
    friend bool operator==(const node_address&, const node_address&) = default;
};

// A cluster node that does not serve the key's slot names the one that does.
struct redirection {
    bool ask = false;  // ASK: this command only, preceded by ASKING; MOVED: the slot has a new owner
    std::uint16_t slot = 0;
    node_address to;
};
// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 [::1]:6381"; nullopt for any other error text.
[[nodiscard]] std::optional<redirection> parse_redirection(std::string_view error_text);

struct slot_range {
    std::uint16_t first = 0;
    std::uint16_t last = 0;
    node_address master;
};
// The ranges of a CLUSTER SLOTS reply and their masters (replicas are ignored). An empty
// host is the node that answered, `asked`; a range whose master's endpoint is "?" (unknown) is left out.
[[nodiscard]] std::vector<slot_range> parse_cluster_slots(const redisReply& r, const node_address& asked);

}  // namespace idem::redis_detail
