// idem/inbox.hpp: process each message at most once per consumer.
//
// For brokers and consumers without an inbox of their own. The message id is
// the identity (the fingerprint is constant), so a redelivery serialized
// differently is still a duplicate; two consumers never dedupe each other.
//
//   idem::inbox box{exec};
//   switch (box.process("billing.invoice-created", msg.id, idem::scope::tenant(msg.tenant),
//                       [&] { handle(msg); })) {
//       case idem::execution_status::executed:
//       case idem::execution_status::replayed:  ack(msg); break;   // replayed: a duplicate
//       default:                                 redeliver_later(msg);  // in flight elsewhere
//   }
#pragma once

#include <stop_token>
#include <string>
#include <string_view>

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

    // Runs `handler` (void() or void(std::stop_token)) unless the message was processed.
    // Options default to the built-in "messaging" profile (7-day retention). Every overload
    // takes [transaction,] consumer, message id, owner, handler, [codec,] options, stop.
    template <class Handler>
    [[nodiscard]] execution_status process(std::string_view consumer, std::string_view message_id, const scope& owner,
                                           Handler&& handler, execution_options options = {},
                                           std::stop_token stop = {}) {
        auto run = [&](std::stop_token token) {
            detail::invoke_operation(handler, std::move(token));
            return done{};
        };
        return executor_
            .execute(key_for(consumer, message_id, owner), fingerprint, with_defaults(std::move(options)), run,
                     done_codec(), std::move(stop))
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

    // Inside `tx`: the record commits with the handler's writes.
    template <class Handler>
    [[nodiscard]] execution_status process(transaction& tx, std::string_view consumer, std::string_view message_id,
                                           const scope& owner, Handler&& handler, execution_options options = {},
                                           std::stop_token stop = {}) {
        auto run = [&](std::stop_token token) {
            detail::invoke_operation(handler, std::move(token));
            return done{};
        };
        return executor_
            .execute(tx, key_for(consumer, message_id, owner), fingerprint, with_defaults(std::move(options)), run,
                     done_codec(), std::move(stop))
            .status();
    }

private:
    struct done {};
    struct done_codec_type final : result_codec<done> {
        [[nodiscard]] std::string serialize(const done&) const override { return {}; }
        [[nodiscard]] done deserialize(std::string_view) const override { return {}; }
    };
    static const done_codec_type& done_codec() {
        static const done_codec_type codec;
        return codec;
    }

    static execution_options with_defaults(execution_options options) {
        if (options.profile.empty()) options.profile = std::string(messaging_profile);
        options.entry = entry_point::inbox;
        return options;
    }

    executor& executor_;
};

}  // namespace idem
