// The Lua scripts of the Redis store: one per operation, each on one key.
//
// An entry is a hash: t (token), f (fingerprint) and, once completed, p (the
// payload, possibly empty). Lease and retention are the key's PEXPIRE, so an
// expired entry is simply absent. A key that holds anything else is reported,
// never overwritten.
//
// A remembered key (profile_options::remember) has a tombstone beside its
// entry: a string key in the same hash slot (tombstone_key) holding the
// fingerprint's digest, written with the result and expiring at the window's
// end. KEYS[2], where a script takes it, is that key; it is optional.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "idem/clock.hpp"

namespace idem::redis_detail {

struct script {
    std::string_view body;
    std::string sha1;  // lowercase hex, what EVALSHA names it by
};

// KEYS[1] entry, KEYS[2] its tombstone; ARGV token, fingerprint, lease ms. Returns {0} reserved,
// {1} in flight, {2, payload} completed, {3} fingerprint mismatch, {4} foreign key, {5, digest}
// no entry but a tombstone (for the fingerprint whose digest it holds).
const script& reserve_script();
// KEYS[1] entry, KEYS[2] its tombstone; ARGV token, fingerprint, payload, retention ms, and to
// remember the key: the fingerprint's digest, the window in ms. Returns 1 stored, 0 refused, 2 foreign key.
const script& complete_script();
// KEYS[1] entry; ARGV token. Returns 1 removed, 0 refused.
const script& release_script();
// KEYS[1] entry, KEYS[2] its tombstone; ARGV "1" to force. Returns {0} absent, {1, pttl, payload
// bytes, tombstones deleted} deleted, {2, pttl, -1} in flight and kept, {3} foreign key or one with
// no TTL (kept), {5, tombstone pttl} no entry, its tombstone deleted. Payload bytes -1: in flight.
const script& forget_script();
// KEYS[1] entry; ARGV "1" for the payload too. Read only. Returns {0} absent,
// {1, pttl, -1} in flight, {1, pttl, payload bytes[, payload]} completed, {3} foreign key
// or one with no TTL.
const script& inspect_script();

// A lease or retention as PEXPIRE takes it: whole milliseconds, rounded up, so a
// positive span never becomes 0 (which would delete the entry on the spot).
[[nodiscard]] constexpr std::int64_t pexpire_milliseconds(duration span) noexcept {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(span).count();
    return ms < 1 ? 1 : ms;
}

}  // namespace idem::redis_detail
