// One hiredis connection: opened, authenticated and on its database, or broken.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "idem/error.hpp"
#include "idem/redis_store.hpp"
#include "reply.hpp"

namespace idem::redis_detail {

struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply = std::unique_ptr<redisReply, reply_deleter>;

class connection {
public:
    // Connects, then sends AUTH and SELECT (when configured) in one round trip.
    // Throws store_error: connection_lost when the server is unreachable, other when it refuses.
    [[nodiscard]] static std::unique_ptr<connection> open(const redis_options& options);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    // Sends one command (every argument binary-safe) and returns its reply, an
    // error reply included. An I/O failure or timeout breaks the connection and
    // throws store_error connection_lost: the command may or may not have run.
    [[nodiscard]] reply command(std::span<const std::string_view> args);

    // False once an I/O error broke it, or discard() was called: the pool then drops it.
    [[nodiscard]] bool healthy() const noexcept { return !broken_; }
    // Open but talking to the wrong server (a demoted master): dropped when given back.
    void discard() noexcept { broken_ = true; }
    // Still open, with nothing unread: checked without a round trip before reuse,
    // so a connection the server closed while idle (a restart) is dropped unused.
    [[nodiscard]] bool idle_and_open() const noexcept;

private:
    explicit connection(redisContext* context) noexcept : context_(context) {}
    [[noreturn]] void fail();

    redisContext* context_;
    bool broken_ = false;
};

}  // namespace idem::redis_detail
