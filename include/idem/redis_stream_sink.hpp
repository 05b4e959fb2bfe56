// idem/redis_stream_sink.hpp: an outbox sink (idem/outbox_relay.hpp) that
// appends each message to a Redis stream with XADD, over the Redis store's
// connections (hiredis, its pool and options).
//
//   auto sink = std::make_shared<idem::redis_stream_sink>(idem::redis_stream_options{
//       .redis = {.host = "127.0.0.1", .port = 6379}, .stream = "payments:events", .max_length = 1000000});
//   idem::outbox_relay relay{db, sink};
//
// Each entry has the fields id, topic, ordering_key (when the message has
// one), payload and h:<name> for each header, all binary-safe. XADD is not
// idempotent: a redelivery appends the entry again, so consumers dedupe by the
// id field. An error reply that retrying may cure (TRYAGAIN, LOADING, a lost
// connection) is a retry; any other (WRONGTYPE, an ACL refusal) dead-letters the
// message. Link idem_redis.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "idem/export.hpp"
#include "idem/outbox_relay.hpp"
#include "idem/redis_store.hpp"

namespace idem {

struct redis_stream_options {
    redis_options redis = {};
    std::string stream = "idem:outbox";  // the stream key
    bool stream_per_topic = false;       // then the key is stream + ":" + topic
    std::size_t max_length = 0;          // XADD MAXLEN ~ this when above 0: older entries are trimmed
};

class IDEM_API redis_stream_sink final : public outbox_sink {
public:
    // options_error naming every invalid option; store_error when the server cannot be reached.
    explicit redis_stream_sink(redis_stream_options options);
    ~redis_stream_sink() override;

    // Thread-safe: each call borrows a pooled connection.
    delivery_result deliver(const outbox_delivery& message) override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace idem
