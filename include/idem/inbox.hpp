// idem/inbox.hpp: process each message at most once per consumer.
//
// For brokers and consumers without an inbox of their own. The message id is
// the identity (the fingerprint is constant), so a redelivery serialized
// differently is still a duplicate; two consumers never dedupe each other. On
// a SQL database the record commits with the handler's writes:
//
//   idem::inbox box{db.executor()};
//   auto done = box.process(db, "billing.invoice-created", msg.id, idem::scope::tenant(msg.tenant),
//                           [&](idem::unit_of_work& uow) { record_invoice(uow.sql(), msg); });
//   if (done.has_value()) ack(msg);  // ran now, or a duplicate (replayed)
//   else redeliver_later(msg);       // in flight elsewhere
//
// See docs/inbox.md.
#pragma once

#include <stop_token>
#include <string>
#include <string_view>

#include "idem/database.hpp"
#include "idem/executor.hpp"
#include "idem/export.hpp"
#include "idem/keys.hpp"

namespace idem {

class IDEM_API inbox {
public:
    static constexpr std::string_view fingerprint = "message";

    // `exec` must outlive the inbox.
    explicit inbox(executor& exec) : executor_(exec) {}

    // Namespace "messaging:{consumer}", key keys::from_message(message_id, consumer).
    [[nodiscard]] static record_key key_for(std::string_view consumer, std::string_view message_id,
                                            const scope& owner) {
        return record_key("messaging:" + std::string(consumer), owner, keys::from_message(message_id, consumer));
    }

    // In a unit of work of `db`: handler(unit_of_work&) -> T (void, or a type with a
    // default codec) runs unless the message was processed, its record in the same
    // transaction; a throw rolls both back. A concurrent redelivery waits for the first
    // and is answered replayed. Options default to the built-in "messaging" profile
    // (7-day retention); `db`'s executor decides.
    template <class Handler>
    auto process(database& db, std::string_view consumer, std::string_view message_id, const scope& owner,
                 Handler&& handler, execution_options options = {}) {
        return db.once(key_for(consumer, message_id, owner), fingerprint, std::forward<Handler>(handler),
                       with_defaults(std::move(options)));
    }

    // The same with a result stored and replayed through `codec`.
    template <class T, class Handler>
    [[nodiscard]] execution<T> process(database& db, std::string_view consumer, std::string_view message_id,
                                       const scope& owner, Handler&& handler, const result_codec<T>& codec,
                                       execution_options options = {}) {
        return db.once(key_for(consumer, message_id, owner), fingerprint, std::forward<Handler>(handler), codec,
                       with_defaults(std::move(options)));
    }

    // Inside a unit of work already open (several messages in one transaction, say):
    // the key is reserved in `uow`, so the record commits or rolls back with it.
    template <class Handler>
    [[nodiscard]] execution_status process(unit_of_work& uow, std::string_view consumer, std::string_view message_id,
                                           const scope& owner, Handler&& handler, execution_options options = {},
                                           std::stop_token stop = {}) {
        auto run = [&](std::stop_token token) {
            detail::invoke_operation(handler, std::move(token));
            return detail::unit{};
        };
        const default_codec<detail::unit> codec;
        return detail::executor_access::execute_in(executor_, uow, key_for(consumer, message_id, owner), fingerprint,
                                                   with_defaults(std::move(options)), run, codec, std::move(stop))
            .status();
    }

    // Lease mode, for handlers whose effects are outside a database transaction:
    // handler (void() or void(std::stop_token)) runs unless the message was processed.
    template <class Handler>
    [[nodiscard]] execution_status process(std::string_view consumer, std::string_view message_id, const scope& owner,
                                           Handler&& handler, execution_options options = {},
                                           std::stop_token stop = {}) {
        auto run = [&](std::stop_token token) { detail::invoke_operation(handler, std::move(token)); };
        return executor_
            .execute(key_for(consumer, message_id, owner), fingerprint, with_defaults(std::move(options)), run,
                     std::move(stop))
            .status();
    }

    // The same with a result stored and replayed through `codec`.
    template <class T, class Handler>
    [[nodiscard]] execution<T> process(std::string_view consumer, std::string_view message_id, const scope& owner,
                                       Handler&& handler, const result_codec<T>& codec, execution_options options = {},
                                       std::stop_token stop = {}) {
        return executor_.execute(key_for(consumer, message_id, owner), fingerprint, with_defaults(std::move(options)),
                                 handler, codec, std::move(stop));
    }

private:
    static execution_options with_defaults(execution_options options) {
        if (options.profile.empty()) options.profile = std::string(messaging_profile);
        options.entry = entry_point::inbox;
        return options;
    }

    executor& executor_;
};

}  // namespace idem
