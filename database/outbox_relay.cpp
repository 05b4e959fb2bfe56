// The outbox relay: threads that claim due messages (one short transaction),
// deliver them outside any transaction, and settle the claim (in the next
// claim's transaction): delivered, due again after the backoff, or dead. A
// relay that dies between the two loses nothing: its claim's lease ends and
// the messages are due again, so delivery is at least once and a receiver
// dedupes by message id.
#include "idem/outbox_relay.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>

#include "idem/database.hpp"
#include "idem/error.hpp"
#include "internal/crypto.hpp"
#include "internal/retry_schedule.hpp"
#include "pass_threads.hpp"
#include "sql/outbox_table.hpp"

namespace idem {
namespace {

namespace table = detail::outbox_table;

std::vector<std::string> problems_of(const outbox_relay_options& o, const outbox_sink* sink) {
    std::vector<std::string> problems;
    if (sink == nullptr) problems.emplace_back("sink must not be null");
    if (o.batch < 1 || o.batch > 10000) problems.emplace_back("batch must be between 1 and 10000");
    if (o.threads < 1 || o.threads > 64) problems.emplace_back("threads must be between 1 and 64");
    if (o.lease < std::chrono::milliseconds(100) || o.lease > std::chrono::hours(24))
        problems.emplace_back("lease must be between 100ms and 24h");
    if (o.max_attempts < 1 || o.max_attempts > 1000) problems.emplace_back("max_attempts must be between 1 and 1000");
    if (o.first_backoff < std::chrono::milliseconds(0) || o.max_backoff < o.first_backoff ||
        o.max_backoff > std::chrono::hours(24))
        problems.emplace_back("first_backoff must be at least 0 and at most max_backoff, max_backoff at most 24h");
    if (o.idle_wait < std::chrono::milliseconds(1) || o.idle_wait > std::chrono::minutes(1))
        problems.emplace_back("idle_wait must be between 1ms and 1m");
    if (o.report_every < std::chrono::milliseconds(0)) problems.emplace_back("report_every must not be negative");
    return problems;
}

std::string claim_token() {
    std::array<std::byte, 16> bytes{};
    detail::random_bytes(bytes);
    return detail::hex(bytes);
}

}  // namespace

callback_sink::callback_sink(callback deliver) : deliver_(std::move(deliver)) {
    if (!deliver_) throw std::invalid_argument("idem: callback_sink needs a callable");
}

struct IDEM_LOCAL outbox_relay::impl {
    database& db;
    std::shared_ptr<outbox_sink> sink;
    outbox_relay_options options;
    detail::retry_schedule backoff;

    std::atomic<std::uint64_t> delivered{0};
    std::atomic<std::uint64_t> failed{0};
    std::atomic<std::uint64_t> duplicates{0};
    std::atomic<std::uint64_t> conflicts{0};
    detail::pass_threads threads;

    impl(database& d, std::shared_ptr<outbox_sink> s, outbox_relay_options o)
        : db(d),
          sink(std::move(s)),
          options(std::move(o)),
          backoff{.first = options.first_backoff, .ceiling = options.max_backoff},
          threads([this] { return thread_rounds(); }, [this] { options.telemetry->on_outbox(metrics()); },
                  {.threads = options.threads,
                   .idle_wait = options.idle_wait,
                   .report_every = options.report_every,
                   .failure_event = "idem.outbox.relay_failed",
                   .report_failure_event = "idem.outbox.report_failed",
                   .telemetry = options.telemetry}) {
        if (!options.telemetry) options.telemetry = null_sink();
    }

    // One claim: its token and the end of its lease.
    struct claim_ticket {
        std::string token = claim_token();
        std::int64_t lease_end = 0;
    };

    // What a batch's settle records: the claim, and the deliveries that failed.
    struct outcome {
        claim_ticket ticket;
        std::vector<table::unsettled> failed;
        bool keyed = false;
        std::size_t delivered = 0;
    };

    std::vector<table::claimed_row> claim(unit_of_work& uow, claim_ticket& ticket) {
        const std::int64_t now = table::now_ms();
        ticket.lease_end = now + options.lease.count();
        return table::claim(uow, options.batch, now, ticket.lease_end, ticket.token);
    }

    // Runs `claiming` (a transaction's work that claims) in a transaction; a
    // claim that met an id again rolls back, the intake is taken in message
    // by message in a transaction of its own, and the claim runs again.
    template <class Claiming>
    std::vector<table::claimed_row> transact_claim(Claiming&& claiming) {
        for (;;) {
            try {
                return db.transact(claiming);
            } catch (const table::id_arrived_again&) {
                report(
                    db.transact([&](unit_of_work& uow) { return table::take_in_one_by_one(uow, options.batch * 16); }));
            }
        }
    }

    // Every message whose id was taken: counted, and each conflict logged.
    void report(const table::intake_report& r) {
        duplicates += r.duplicates.size();
        conflicts += r.conflicts.size();
        for (const table::arrived_again& d : r.duplicates)
            options.telemetry->on_log({.level = log_level::warning,
                                       .name = "idem.outbox.duplicate",
                                       .key_hash = {},
                                       .message = "idem: message " + d.id + " (" + d.topic +
                                                  ") was published twice with the same content; delivered once"});
        for (const table::arrived_again& c : r.conflicts)
            options.telemetry->on_log(
                {.level = log_level::error,
                 .name = "idem.outbox.id_conflict",
                 .key_hash = {},
                 .message = "idem: message " + c.id + " (" + c.topic +
                            ") arrived with content other than the message published under that id before; "
                            "kept as dead letter " +
                            c.kept_as + " (idem outbox dead, idem outbox requeue)"});
    }

    void settle(unit_of_work& uow, const outcome& o) {
        table::settle(uow, o.ticket.token, o.ticket.lease_end, o.failed, table::now_ms(), o.keyed);
    }

    // Delivers the claimed messages (sorted by seq) one by one, outside any transaction.
    outcome deliver(std::vector<table::claimed_row>& claimed, claim_ticket ticket) {
        outcome o{.ticket = std::move(ticket), .failed = {}};
        for (table::claimed_row& row : claimed) {
            o.keyed = o.keyed || row.ordering_key.has_value();
            outbox_delivery message{
                .id = std::move(row.id),
                .topic = std::move(row.topic),
                .ordering_key = std::move(row.ordering_key),
                .headers = std::move(row.headers),
                .payload = std::move(row.payload),
                .attempt = row.attempt,
                .published_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(row.created_at))};
            std::optional<delivery_result> result;
            try {
                result.emplace(sink->deliver(message));
            } catch (const std::exception& e) {
                result.emplace(delivery_result::retry(e.what()));
            } catch (...) {
                result.emplace(delivery_result::retry("the sink threw"));
            }
            if (result->what() == delivery_result::kind::delivered) {
                ++o.delivered;
                continue;
            }
            ++failed;
            const bool dead = result->what() == delivery_result::kind::refused || row.attempt >= options.max_attempts;
            const auto wait =
                std::max<std::chrono::microseconds>(detail::backoff_after(backoff, row.attempt), result->after());
            o.failed.push_back(
                {.id = message.id,
                 .kind = dead ? table::settle_kind::dead : table::settle_kind::retry,
                 .available_at = table::now_ms() + std::chrono::duration_cast<std::chrono::milliseconds>(wait).count(),
                 .answer = result->answer()});
        }
        return o;
    }

    std::size_t run_once() {
        claim_ticket ticket;
        std::vector<table::claimed_row> claimed = transact_claim([&](unit_of_work& uow) { return claim(uow, ticket); });
        if (claimed.empty()) return 0;
        const outcome o = deliver(claimed, std::move(ticket));
        db.transact([&](unit_of_work& uow) { settle(uow, o); });
        delivered += o.delivered;
        return claimed.size();
    }

    // A thread's rounds: each settles the batch before (delivered outside any
    // transaction) and claims the next in one transaction, where run_once()
    // takes two; the next message of a key just delivered, due now, may be
    // claimed in that same transaction. A round whose transaction fails keeps
    // its batch to settle with the next claim (a claim whose lease ended
    // meanwhile is another relay's: settling touches none of its messages);
    // the thread settles what is left when it stops.
    detail::thread_work thread_rounds() {
        auto unsettled = std::make_shared<std::optional<outcome>>();
        return {.pass = [this, unsettled] { return round(*unsettled); },
                .finish =
                    [this, unsettled] {
                        if (!*unsettled) return;
                        db.transact([&](unit_of_work& uow) { settle(uow, **unsettled); });
                        delivered += (*unsettled)->delivered;
                    }};
    }

    std::size_t round(std::optional<outcome>& unsettled) {
        claim_ticket ticket;
        std::vector<table::claimed_row> claimed = transact_claim([&](unit_of_work& uow) {
            if (unsettled) settle(uow, *unsettled);
            return claim(uow, ticket);
        });
        if (unsettled) delivered += unsettled->delivered;
        unsettled.reset();
        if (claimed.empty()) return 0;
        unsettled = deliver(claimed, std::move(ticket));
        return claimed.size();
    }

    outbox_metrics metrics() {
        outbox_metrics m = outbox_backlog(db);
        m.delivered = delivered.load();
        m.failed = failed.load();
        m.duplicates = duplicates.load();
        m.conflicts = conflicts.load();
        return m;
    }
};

outbox_relay::outbox_relay(database& db, std::shared_ptr<outbox_sink> sink, outbox_relay_options options) {
    if (auto problems = problems_of(options, sink.get()); !problems.empty()) throw options_error(std::move(problems));
    impl_ = std::make_unique<impl>(db, std::move(sink), std::move(options));
}

outbox_relay::~outbox_relay() {
    stop();
}

void outbox_relay::start() {
    impl_->threads.start();
}

void outbox_relay::stop() {
    impl_->threads.stop();
}

bool outbox_relay::running() const {
    return impl_->threads.running();
}

std::size_t outbox_relay::run_once() {
    return impl_->run_once();
}

outbox_metrics outbox_relay::metrics() {
    return impl_->metrics();
}

outbox_metrics outbox_backlog(database& db) {
    const table::totals t = db.transact([](unit_of_work& uow) { return table::count(uow); });
    outbox_metrics m{.pending = static_cast<std::uint64_t>(t.pending), .dead = static_cast<std::uint64_t>(t.dead)};
    if (t.oldest_pending)
        m.lag = std::chrono::milliseconds(std::max<std::int64_t>(0, table::now_ms() - *t.oldest_pending));
    return m;
}

std::size_t requeue_dead_letters(database& db, const std::optional<std::string>& id) {
    return db.transact([&](unit_of_work& uow) { return table::requeue(uow, id, table::now_ms()); });
}

std::vector<dead_letter> dead_letters(database& db, std::size_t limit) {
    if (limit < 1 || limit > 10000) throw std::invalid_argument("idem: dead_letters lists 1 to 10000 messages");
    return db.transact([&](unit_of_work& uow) {
        std::vector<dead_letter> out;
        for (table::dead_row& r : table::dead_letters(uow, limit))
            out.push_back({std::move(r.id), std::move(r.topic), r.attempts, std::move(r.last_answer)});
        return out;
    });
}

purge_result purge_delivered_messages(database& db, const purge_options& options) {
    return purge_batches(
        [&](std::size_t limit, duration older_than) {
            const std::int64_t before =
                table::now_ms() - std::chrono::duration_cast<std::chrono::milliseconds>(older_than).count();
            return db.transact([&](unit_of_work& uow) { return table::purge(uow, limit, before); });
        },
        options);
}

}  // namespace idem
