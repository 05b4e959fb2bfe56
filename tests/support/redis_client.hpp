// A bare hiredis connection for tests: to look at and tamper with what a store wrote.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace idem::test {

struct redis_endpoint {
    std::string host = "127.0.0.1";
    int port = 0;
};

class redis_client {
public:
    struct reply_deleter {
        void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
    };
    using reply = std::unique_ptr<redisReply, reply_deleter>;

    // Throws std::runtime_error when it cannot connect.
    explicit redis_client(const redis_endpoint& at, std::chrono::milliseconds timeout = std::chrono::seconds(2));

    // Any command, binary-safe. Throws on an I/O error, not on an error reply.
    reply command(std::initializer_list<std::string_view> args);
    // The reply as text (a string, status or error), or its integer in decimal.
    std::string text(std::initializer_list<std::string_view> args);

private:
    struct context_deleter {
        void operator()(redisContext* c) const noexcept { redisFree(c); }
    };
    std::unique_ptr<redisContext, context_deleter> context_;
};

}  // namespace idem::test
