// idem/outbox.hpp: messages a unit of work publishes, written to the outbox
// (its intake, which the relay's claims empty into it) in its own
// transaction, so they leave (through idem::outbox_relay) if and only if the
// business writes commit.
//
//   db.once(key, fingerprint, [&](idem::unit_of_work& uow) {
//       move_money(uow, transfer);
//       uow.publish({.topic = "transfer.completed", .payload = transfer_json, .ordering_key = transfer.from});
//   });
//
// A message's id names one committed effect. Inside db.once it derives from
// the record key, a token of the call and the message's place in the work: a
// call's reruns (after a conflict, none of which committed) publish the same
// ids, and every other call that runs the work (a duplicate in Observe or
// Off, a key run again after its record expired or was forgotten) publishes
// new ones, so a receiver that dedupes by id applies each effect once. See
// docs/outbox.md.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.hpp"
#include "idem/export.hpp"

namespace idem {

class record_key;
class unit_of_work;

// Bytes, both: no text assumption (NUL and invalid UTF-8 are kept as they are).
struct message_header {
    std::string name;
    std::string value;
    friend bool operator==(const message_header&, const message_header&) = default;
};

// What unit_of_work::publish writes. The topic and the ordering key are 1 to
// 255 bytes; a message with an ordering key is delivered only after every
// message of that key published before it.
struct outgoing_message {
    std::string topic;
    std::string payload;
    std::optional<std::string> ordering_key = {};
    std::vector<message_header> headers = {};
};

inline constexpr std::size_t max_topic_bytes = 255;
inline constexpr std::size_t max_ordering_key_bytes = 255;

// publish() refused a message: its payload and headers together are over the
// limit the transaction was opened with (database_options::max_message_bytes).
// Nothing was written; the work decides whether its transaction goes on.
class IDEM_API message_too_large : public error {
public:
    message_too_large(std::size_t bytes, std::size_t limit);
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    [[nodiscard]] std::size_t limit() const noexcept { return limit_; }

private:
    std::size_t bytes_;
    std::size_t limit_;
};

namespace detail {

// unit_of_work::publish (lib/sql/published_messages.cpp): checks the message,
// gives it its id and holds it until the unit's next flush.
IDEM_API std::string publish(unit_of_work& uow, outgoing_message message);

// One db.once call: its token, made when its work first publishes, is in the
// ids of every message the work publishes in any of the call's attempts.
struct publishing_call {
    std::string token;
};

// While one lives, messages `uow` publishes take their ids from `key` (the
// record db.once is writing) and `call`: set by detail::flushed around the work.
class IDEM_API publishing_record {
public:
    publishing_record(unit_of_work& uow, const record_key& key, publishing_call& call);
    ~publishing_record();
    publishing_record(const publishing_record&) = delete;
    publishing_record& operator=(const publishing_record&) = delete;
};

}  // namespace detail
}  // namespace idem
