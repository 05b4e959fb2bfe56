#include "scripts.hpp"

#include <span>

#include "internal/crypto.hpp"

namespace idem::redis_detail {
namespace {

script make(std::string_view body) {
    return {body, detail::hex(detail::sha1(std::as_bytes(std::span(body.data(), body.size()))))};
}

}  // namespace

const script& reserve_script() {
    static const script s = make(R"lua(
local e = redis.call('HMGET', KEYS[1], 't', 'f', 'p')
if e[1] and e[2] then
  if e[2] ~= ARGV[2] then return {3} end
  if e[3] then return {2, e[3]} end
  return {1}
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {4} end
if KEYS[2] then
  local t = redis.call('GET', KEYS[2])
  if t then return {5, t} end
end
redis.call('HSET', KEYS[1], 't', ARGV[1], 'f', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {0}
)lua");
    return s;
}

const script& complete_script() {
    static const script s = make(R"lua(
local e = redis.call('HMGET', KEYS[1], 't', 'p')
if e[1] then
  if e[2] or e[1] ~= ARGV[1] then return 0 end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return 2
end
redis.call('HSET', KEYS[1], 't', ARGV[1], 'f', ARGV[2], 'p', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if KEYS[2] and ARGV[5] then redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6]) end
return 1
)lua");
    return s;
}

const script& release_script() {
    static const script s = make(R"lua(
local e = redis.call('HMGET', KEYS[1], 't', 'p')
if e[1] == ARGV[1] and not e[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
)lua");
    return s;
}

const script& forget_script() {
    static const script s = make(R"lua(
local e = redis.call('HMGET', KEYS[1], 't', 'f', 'p')
local function forget_tombstone()
  if KEYS[2] then return redis.call('DEL', KEYS[2]) end
  return 0
end
if not (e[1] and e[2]) then
  if redis.call('EXISTS', KEYS[1]) == 1 then return {3} end
  if KEYS[2] then
    local left = redis.call('PTTL', KEYS[2])
    if left >= 0 then
      redis.call('DEL', KEYS[2])
      return {5, left}
    end
  end
  return {0}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then return {3} end
if not e[3] then
  if ARGV[1] ~= '1' then return {2, ttl, -1} end
  redis.call('DEL', KEYS[1])
  return {1, ttl, -1, forget_tombstone()}
end
redis.call('DEL', KEYS[1])
return {1, ttl, string.len(e[3]), forget_tombstone()}
)lua");
    return s;
}

const script& inspect_script() {
    static const script s = make(R"lua(
local e = redis.call('HMGET', KEYS[1], 't', 'f')
if not (e[1] and e[2]) then
  if redis.call('EXISTS', KEYS[1]) == 1 then return {3} end
  return {0}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then return {3} end
if redis.call('HEXISTS', KEYS[1], 'p') == 0 then return {1, ttl, -1} end
local bytes = redis.call('HSTRLEN', KEYS[1], 'p')
if ARGV[1] == '1' then return {1, ttl, bytes, redis.call('HGET', KEYS[1], 'p')} end
return {1, ttl, bytes}
)lua");
    return s;
}

}  // namespace idem::redis_detail
