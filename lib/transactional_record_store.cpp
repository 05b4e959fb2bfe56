#include "idem/transactional_record_store.hpp"

#include <stdexcept>

namespace idem {
namespace {

void require_active(const unit_of_work& tx) {
    if (tx.state() != transaction_state::active)
        throw std::logic_error("idem: the transaction is " + std::string(to_string(tx.state())) + ", not active");
}

}  // namespace

std::string_view to_string(transaction_state state) noexcept {
    switch (state) {
        case transaction_state::active: return "active";
        case transaction_state::committed: return "committed";
        case transaction_state::rolled_back: return "rolled back";
        case transaction_state::in_doubt: return "in doubt";
    }
    return "unknown";
}

reservation transactional_record_store::try_reserve(unit_of_work& tx, const record_key& key,
                                                    std::string_view fingerprint, duration lease) {
    detail::check_fingerprint(fingerprint);
    detail::check_duration(lease, "lease");
    require_active(tx);
    return do_try_reserve_in(tx, key, fingerprint, lease);
}

bool transactional_record_store::complete(unit_of_work& tx, const record_key& key, std::string_view token,
                                          std::string_view fingerprint, std::string_view payload, duration retention,
                                          duration remember) {
    detail::check_token(token);
    detail::check_fingerprint(fingerprint);
    detail::check_duration(retention, "retention");
    detail::check_remember(remember, retention, traits());
    require_active(tx);
    return do_complete_in(tx, key, token, fingerprint, payload, retention, remember);
}

bool transactional_record_store::release(unit_of_work& tx, const record_key& key, std::string_view token) {
    detail::check_token(token);
    require_active(tx);
    return do_release_in(tx, key, token);
}

record_lookup transactional_record_store::look_up(unit_of_work& tx, const record_key& key,
                                                  std::string_view fingerprint) {
    detail::check_fingerprint(fingerprint);
    require_active(tx);
    return do_look_up_in(tx, key, fingerprint);
}

void transactional_record_store::insert(unit_of_work& tx, const record_key& key, std::string_view fingerprint,
                                        std::optional<std::string_view> payload, duration span, duration remember) {
    detail::check_fingerprint(fingerprint);
    detail::check_duration(span, payload ? "retention" : "lease");
    if (!payload && remember != duration::zero())
        throw std::invalid_argument("idem: only a completed record is remembered");
    detail::check_remember(remember, span, traits());
    require_active(tx);
    do_insert_in(tx, key, fingerprint, payload, span, remember);
}

record_lookup transactional_record_store::do_look_up_in(unit_of_work&, const record_key&, std::string_view) {
    return {record_lookup::found::reserve, {}};
}

void transactional_record_store::do_insert_in(unit_of_work&, const record_key&, std::string_view,
                                              std::optional<std::string_view>, duration, duration) {
    throw std::logic_error("idem: this store has no one-statement record form; look_up() answers reserve");
}

}  // namespace idem
