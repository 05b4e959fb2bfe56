// idem/outbox_relay.hpp: delivers what units of work published (idem/outbox.hpp)
// to a sink, at least once, in order per ordering key; retries with backoff,
// dead-letters after max_attempts, reports its figures on the telemetry sink.
//
//   auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery& m) {
//       broker.send(m.topic, m.id, m.payload);  // throws: tried again later
//       return idem::delivery_result::delivered();
//   });
//   idem::outbox_relay relay{db, sink, {.batch = 100, .max_attempts = 10}};
//   relay.start();  // threads of its own; stop() or the destructor ends them
//
// Link idem_database (pkg-config idem-database). See docs/outbox.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/outbox.hpp"
#include "idem/purge.hpp"
#include "idem/telemetry.hpp"

namespace idem {

class database;

// One message as a sink receives it.
struct outbox_delivery {
    std::string id;  // the same for every attempt: receivers dedupe by it
    std::string topic;
    std::optional<std::string> ordering_key;
    std::vector<message_header> headers;
    std::string payload;
    int attempt = 1;  // from 1
    std::chrono::system_clock::time_point published_at;
};

// What a sink says of one delivery.
class IDEM_API delivery_result {
public:
    enum class kind { delivered, retry, refused };

    [[nodiscard]] static delivery_result delivered() { return {kind::delivered, {}, {}}; }
    // Not now: tried again after the backoff (or at least `after`, when the sink
    // was told a wait), dead once max_attempts ran out; `answer` is kept.
    [[nodiscard]] static delivery_result retry(std::string answer, std::chrono::milliseconds after = {}) {
        return {kind::retry, std::move(answer), after};
    }
    // Never: dead-lettered at once, `answer` kept.
    [[nodiscard]] static delivery_result refused(std::string answer) { return {kind::refused, std::move(answer), {}}; }

    [[nodiscard]] kind what() const noexcept { return kind_; }
    [[nodiscard]] const std::string& answer() const noexcept { return answer_; }
    [[nodiscard]] std::chrono::milliseconds after() const noexcept { return after_; }

private:
    delivery_result(kind k, std::string answer, std::chrono::milliseconds after)
        : kind_(k), answer_(std::move(answer)), after_(after) {}
    kind kind_;
    std::string answer_;
    std::chrono::milliseconds after_;
};

// Where a relay delivers. Called from the relay's threads (one call at a time
// per thread, several threads with relay_options::threads > 1). An exception is
// a retry with its what() as the answer.
class IDEM_API outbox_sink {
public:
    virtual ~outbox_sink() = default;
    virtual delivery_result deliver(const outbox_delivery& message) = 0;
};

// Any broker: a function that delivers one message.
class IDEM_API callback_sink final : public outbox_sink {
public:
    using callback = std::function<delivery_result(const outbox_delivery&)>;
    explicit callback_sink(callback deliver);
    delivery_result deliver(const outbox_delivery& message) override { return deliver_(message); }

private:
    callback deliver_;
};

struct outbox_relay_options {
    std::size_t batch = 100;  // messages one claim takes (1 to 10,000)
    int threads = 1;          // each claims and delivers on its own (1 to 64)
    // How long a claim holds its messages: a relay killed mid-batch loses
    // nothing, its messages are due again when the lease ends. Longer than a
    // batch's deliveries take.
    std::chrono::milliseconds lease{30000};
    int max_attempts = 10;  // then the message is dead
    // Backoff between attempts of one message: first, doubled up to ceiling, with jitter.
    std::chrono::milliseconds first_backoff{1000};
    std::chrono::milliseconds max_backoff{300000};
    // The wait when nothing is due (and after the database failed).
    std::chrono::milliseconds idle_wait{200};
    // outbox_metrics on the telemetry sink this often, and once more when stop() has
    // ended the threads, so the sink ends with the final figures (0: never).
    std::chrono::milliseconds report_every{1000};
    std::shared_ptr<telemetry_sink> telemetry = nullptr;
};

class IDEM_API outbox_relay {
public:
    // options_error naming every invalid option.
    outbox_relay(database& db, std::shared_ptr<outbox_sink> sink, outbox_relay_options options = {});
    ~outbox_relay();  // stops
    outbox_relay(const outbox_relay&) = delete;
    outbox_relay& operator=(const outbox_relay&) = delete;

    // Starts the threads; stop() asks them to end after the batch they deliver
    // and waits for them. Both may be called from any thread, and again.
    void start();
    void stop();
    [[nodiscard]] bool running() const;

    // One claim on the calling thread: claims, delivers, settles; returns how
    // many messages it claimed (0: nothing was due). For tests and `idem relay
    // --drain`; store_error when the database fails.
    std::size_t run_once();
    // The figures as of now (pending, dead and lag read from the outbox and its intake).
    [[nodiscard]] outbox_metrics metrics();

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

// Pending, dead and lag as the table has them now (delivered and failed are
// zero: those count what one relay did).
[[nodiscard]] IDEM_API outbox_metrics outbox_backlog(database& db);

// Dead letters back to pending, attempts reset: the one with `id`, or every one.
// Returns how many.
IDEM_API std::size_t requeue_dead_letters(database& db, const std::optional<std::string>& id = std::nullopt);

struct dead_letter {
    std::string id;
    std::string topic;
    int attempts = 0;
    std::string last_answer;
};
// The oldest `limit` dead letters.
[[nodiscard]] IDEM_API std::vector<dead_letter> dead_letters(database& db, std::size_t limit = 100);

// Deletes messages delivered at least options.older_than ago, in batches
// (options.batch each, their own short transaction, in the order they were
// delivered, through an index), with the purge job's loop (idem/purge.hpp).
IDEM_API purge_result purge_delivered_messages(database& db, const purge_options& options = {});

}  // namespace idem
