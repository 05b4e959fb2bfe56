// Any bytes a Redis server could send: hiredis's reader parses them (RESP2) into
// a reply, and every decoder of the Redis store either answers or throws
// idem::store_error; a MOVED/ASK error text parses to a slot and an address or
// to nothing; a slot map's ranges stay inside 0..16383.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_input.hpp"
#include "idem/error.hpp"
#include "reply.hpp"

namespace {

namespace rd = idem::redis_detail;

template <class Decode>
void decoded_or_typed(Decode&& decode) {
    try {
        decode();
    } catch (const idem::store_error&) {
        // a typed refusal of a malformed or error reply
    }
}

void check(const redisReply& r) {
    decoded_or_typed([&] { (void)rd::decode_reserve(r, "token"); });
    decoded_or_typed([&] { (void)rd::decode_complete(r); });
    decoded_or_typed([&] { (void)rd::decode_release(r); });
    decoded_or_typed([&] {
        for (const auto& range : rd::parse_cluster_slots(r, {"127.0.0.1", 7000}))
            if (range.first > range.last || range.last > 16383) throw std::logic_error("a slot range out of bounds");
    });
    if (r.type == REDIS_REPLY_ERROR) {
        (void)rd::failure_of(rd::error_code(r));
        if (const auto to = rd::parse_redirection(std::string_view(r.str, r.len)); to && to->slot > 16383)
            throw std::logic_error("a redirection to a slot out of bounds");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    redisReader* reader = redisReaderCreate();
    if (redisReaderFeed(reader, reinterpret_cast<const char*>(data), size) == REDIS_OK) {
        void* reply = nullptr;
        while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != nullptr) {
            check(*static_cast<const redisReply*>(reply));
            freeReplyObject(reply);
            reply = nullptr;
        }
    }
    redisReaderFree(reader);
    return 0;
}
