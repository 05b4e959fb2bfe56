#include "redis_client.hpp"

#include <stdexcept>
#include <vector>

namespace idem::test {

redis_client::redis_client(const redis_endpoint& at, std::chrono::milliseconds timeout) {
    const timeval limit{static_cast<time_t>(timeout.count() / 1000),
                        static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    context_.reset(redisConnectWithTimeout(at.host.c_str(), at.port, limit));
    if (!context_ || context_->err != 0)
        throw std::runtime_error("cannot connect to redis at " + at.host + ":" + std::to_string(at.port) + ": " +
                                 (context_ ? context_->errstr : "out of memory"));
    redisSetTimeout(context_.get(), limit);
}

redis_client::reply redis_client::command(std::initializer_list<std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (auto arg : args) {
        argv.push_back(arg.data());
        lengths.push_back(arg.size());
    }
    reply r(static_cast<redisReply*>(
        redisCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
    if (!r) throw std::runtime_error(std::string("redis command failed: ") + context_->errstr);
    return r;
}

std::string redis_client::text(std::initializer_list<std::string_view> args) {
    const reply r = command(args);
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    if (r->type == REDIS_REPLY_NIL) return {};
    return {r->str, r->len};
}

}  // namespace idem::test
