#include "connection.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <cerrno>
#include <new>
#include <stdexcept>
#include <vector>

#include "sigpipe_guard.hpp"

namespace idem::redis_detail {
namespace {

// hiredis's argv form: pointers and lengths, so every argument is binary-safe.
// The store's commands fit in place; a longer one (an outbox XADD with headers) spills to the heap.
class argument_vector {
public:
    explicit argument_vector(std::span<const std::string_view> args) : count_(args.size()) {
        if (count_ > in_place) {
            spilled_values_.resize(count_);
            spilled_lengths_.resize(count_);
        }
        const char** v = values();
        std::size_t* l = count_ > in_place ? spilled_lengths_.data() : lengths_.data();
        for (std::size_t i = 0; i < count_; ++i) {
            v[i] = args[i].data();
            l[i] = args[i].size();
        }
    }
    [[nodiscard]] int count() const noexcept { return static_cast<int>(count_); }
    [[nodiscard]] const char** values() noexcept { return count_ > in_place ? spilled_values_.data() : values_.data(); }
    [[nodiscard]] const std::size_t* lengths() const noexcept {
        return count_ > in_place ? spilled_lengths_.data() : lengths_.data();
    }

private:
    static constexpr std::size_t in_place = 8;
    std::size_t count_;
    std::array<const char*, in_place> values_{};
    std::array<std::size_t, in_place> lengths_{};
    std::vector<const char*> spilled_values_;
    std::vector<std::size_t> spilled_lengths_;
};

timeval to_timeval(std::chrono::milliseconds ms) noexcept {
    return {static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

std::string endpoint(const redis_options& o) {
    return o.unix_socket.empty() ? o.host + ":" + std::to_string(o.port) : o.unix_socket;
}

}  // namespace

std::unique_ptr<connection> connection::open(const redis_options& options) {
    const timeval connect_limit = to_timeval(options.connect_timeout);
    const bool bounded = options.connect_timeout.count() > 0;
    redisContext* context = nullptr;
    if (!options.unix_socket.empty())
        context = bounded ? redisConnectUnixWithTimeout(options.unix_socket.c_str(), connect_limit)
                          : redisConnectUnix(options.unix_socket.c_str());
    else
        context = bounded ? redisConnectWithTimeout(options.host.c_str(), options.port, connect_limit)
                          : redisConnect(options.host.c_str(), options.port);
    if (context == nullptr) throw std::bad_alloc();
    std::unique_ptr<connection> c(new connection(context));
    if (context->err != 0)
        throw store_error(store_failure::connection_lost,
                          "cannot connect to " + endpoint(options) + ": " + context->errstr);
    // A zero timeval clears the socket timeouts: blocking without limit, as asked.
    if (redisSetTimeout(context, to_timeval(options.command_timeout)) != REDIS_OK ||
        (options.unix_socket.empty() && redisEnableKeepAlive(context) != REDIS_OK))
        throw store_error(store_failure::connection_lost,
                          "cannot configure the connection to " + endpoint(options) + ": " + context->errstr);

    // AUTH and SELECT go out together; their replies come back in order.
    const std::string database = std::to_string(options.database);
    std::vector<std::vector<std::string_view>> setup;
    if (!options.password.empty())
        setup.push_back(options.user.empty() ? std::vector<std::string_view>{"AUTH", options.password}
                                             : std::vector<std::string_view>{"AUTH", options.user, options.password});
    if (options.database != 0) setup.push_back({"SELECT", database});
    if (setup.empty()) return c;

    sigpipe_guard guard;
    for (const auto& args : setup) {
        argument_vector argv(args);
        if (redisAppendCommandArgv(context, argv.count(), argv.values(), argv.lengths()) != REDIS_OK) c->fail();
    }
    for (const auto& args : setup) {
        void* raw = nullptr;
        if (redisGetReply(context, &raw) != REDIS_OK) c->fail();
        const reply r(static_cast<redisReply*>(raw));
        if (r->type == REDIS_REPLY_ERROR)
            throw_reply_error(*r, std::string(args[0]) + " refused by " + endpoint(options));
    }
    return c;
}

connection::~connection() {
    redisFree(context_);
}

reply connection::command(std::span<const std::string_view> args) {
    argument_vector argv(args);
    sigpipe_guard guard;
    void* raw = redisCommandArgv(context_, argv.count(), argv.values(), argv.lengths());
    if (raw == nullptr) fail();
    return reply(static_cast<redisReply*>(raw));
}

void connection::fail() {
    const int saved_errno = errno;
    broken_ = true;
    const bool timed_out = context_->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
    throw store_error(store_failure::connection_lost, timed_out ? std::string("no reply within the command timeout")
                                                                : std::string("connection lost: ") + context_->errstr);
}

bool connection::idle_and_open() const noexcept {
    if (broken_ || context_->err != 0) return false;
    char byte = 0;
    const ssize_t n = recv(context_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    // 0: the server closed it; data: a reply nobody asked for; an error: reset.
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace idem::redis_detail
