#include "sql/published_messages.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <utility>

#include "idem/keys.hpp"
#include "idem/record_key.hpp"
#include "idem/unit_of_work.hpp"
#include "internal/crypto.hpp"
#include "internal/text.hpp"
#include "sql/sql_transaction.hpp"

namespace idem {

message_too_large::message_too_large(std::size_t bytes, std::size_t limit)
    : error(error_category::data, "idem: a message of " + std::to_string(bytes) +
                                      " bytes (payload and headers) is over the outbox limit of " +
                                      std::to_string(limit)),
      bytes_(bytes),
      limit_(limit) {}

namespace detail {
namespace {

// The records whose work is running on this thread, innermost last (db.once
// inside db.once joins behind a savepoint).
struct publishing {
    unit_of_work* uow;
    const record_key* key;
    publishing_call* call;
};
thread_local std::vector<publishing> publishing_now;

const publishing* record_of(unit_of_work& uow) noexcept {
    for (auto it = publishing_now.rbegin(); it != publishing_now.rend(); ++it)
        if (it->uow == &uow) return &*it;
    return nullptr;
}

// Topic and ordering key are text columns: valid UTF-8 without NUL, 1 to 255 bytes.
void require_label(std::string_view text, std::string_view what, std::size_t max) {
    require_non_empty_utf8(text, what);
    if (text.size() > max)
        throw std::invalid_argument("idem: " + std::string(what) + " is over " + std::to_string(max) + " bytes");
    if (text.find('\0') != std::string_view::npos)
        throw std::invalid_argument("idem: " + std::string(what) + " holds a NUL byte");
}

}  // namespace

publishing_record::publishing_record(unit_of_work& uow, const record_key& key, publishing_call& call) {
    publishing_now.push_back({&uow, &key, &call});
}

publishing_record::~publishing_record() {
    publishing_now.pop_back();
}

std::string publish(unit_of_work& uow, outgoing_message message) {
    require_label(message.topic, "the message topic", max_topic_bytes);
    if (message.ordering_key) require_label(*message.ordering_key, "the message ordering key", max_ordering_key_bytes);
    std::size_t bytes = message.payload.size();
    for (const message_header& h : message.headers) {
        if (h.name.empty()) throw std::invalid_argument("idem: a message header has an empty name");
        bytes += h.name.size() + h.value.size();
    }
    const std::size_t limit = uow.internals().max_message_bytes();
    if (bytes > limit) throw message_too_large(bytes, limit);
    const publishing* record = record_of(uow);
    if (record == nullptr) return uow.features().part<published_messages>().add(std::move(message), nullptr, {});
    // Made at the call's first message: a call that publishes nothing pays nothing.
    if (record->call->token.empty()) {
        std::array<std::byte, 16> token{};
        random_bytes(token);
        record->call->token = hex(token);
    }
    return uow.features().part<published_messages>().add(std::move(message), record->key, record->call->token);
}

std::string published_messages::add(outgoing_message message, const record_key* record, std::string_view call) {
    std::string id;
    if (record != nullptr) {
        std::string storage_key = record->to_storage_key();
        const std::size_t n = ++published_by_record_[storage_key];
        id = keys::to_uuid_v5("idem.outbox", {storage_key, call, std::to_string(n)});
    } else {
        id = random_uuid();
    }
    held_.push_back({id, std::move(message)});
    return id;
}

void published_messages::flush(unit_of_work& uow) {
    if (held_.empty()) return;
    // Taken first: a failed write leaves nothing to write twice (the transaction is lost anyway).
    const std::vector<outbox_table::new_row> rows = std::exchange(held_, {});
    outbox_table::insert(uow, rows, outbox_table::now_ms());
}

void published_messages::savepoint_rolled_back(int depth) {
    (void)depth;
    held_.clear();
}

}  // namespace detail
}  // namespace idem
