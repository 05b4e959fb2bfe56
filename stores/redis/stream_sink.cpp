#include <string_view>
#include <utility>
#include <vector>

#include "connection_pool.hpp"
#include "idem/redis_stream_sink.hpp"

namespace idem {

struct IDEM_LOCAL redis_stream_sink::impl {
    redis_stream_options options;
    redis_detail::connection_pool pool;

    explicit impl(redis_stream_options o) : options(std::move(o)), pool(options.redis) {}
};

redis_stream_sink::redis_stream_sink(redis_stream_options options) {
    std::vector<std::string> problems;
    if (options.stream.empty()) problems.emplace_back("stream must not be empty");
    if (options.redis.cluster) problems.emplace_back("the stream sink does not speak Redis Cluster");
    if (!problems.empty()) throw options_error(std::move(problems));
    impl_ = std::make_unique<impl>(std::move(options));
}

redis_stream_sink::~redis_stream_sink() = default;

delivery_result redis_stream_sink::deliver(const outbox_delivery& message) {
    const redis_stream_options& o = impl_->options;
    const std::string stream = o.stream_per_topic ? o.stream + ":" + message.topic : o.stream;
    const std::string max_length = std::to_string(o.max_length);
    std::vector<std::string> header_names;
    header_names.reserve(message.headers.size());
    for (const message_header& h : message.headers) header_names.push_back("h:" + h.name);
    std::vector<std::string_view> args = {"XADD", stream};
    if (o.max_length > 0) args.insert(args.end(), {"MAXLEN", "~", max_length});
    args.insert(args.end(), {"*", "id", message.id, "topic", message.topic});
    if (message.ordering_key) args.insert(args.end(), {"ordering_key", *message.ordering_key});
    args.insert(args.end(), {"payload", message.payload});
    for (std::size_t i = 0; i < message.headers.size(); ++i)
        args.insert(args.end(), {header_names[i], message.headers[i].value});
    // A connection that fails throws store_error(connection_lost): a retry, as every exception is.
    auto c = impl_->pool.acquire();
    const redis_detail::reply r = c->command(args);
    if (r->type != REDIS_REPLY_ERROR) return delivery_result::delivered();
    // The server's error text quotes no argument of XADD's; the store's rule says which codes pass.
    const std::string answer(r->str, r->len);
    if (redis_detail::failure_of(redis_detail::error_code(*r)) == store_failure::timeout)
        return delivery_result::retry(answer);
    return delivery_result::refused(answer);
}

}  // namespace idem
