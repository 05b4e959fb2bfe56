// Payouts: money leaves an account for a destination at the payout provider,
// in three steps under one key (idem::operation, docs/steps.md): hold the
// amount (one transaction: the balance and the payout row), send it to the
// provider (a call, with the call key as its Idempotency-Key), settle (one
// transaction: paid, or the hold released when the provider declined). The
// service's completer finishes a payout whose request died between the steps;
// after three failed runs it compensates instead: money that moved stays
// moved (a payout the provider made is settled as paid, its answer stored or
// learnt from the provider), and anything else is cancelled at the provider
// (by the send's key) and the hold released.
#pragma once

#include <idem/http/layer.hpp>
#include <idem/operation.hpp>

#include <memory>
#include <string>
#include <utility>

namespace payments {

// POST /payouts {"account": "alice", "amount": 2500, "destination": "acct_123"}.
struct payout_request {
    std::string account;
    long long amount = 0;
    std::string destination;
};
// The body as a payout (rejected 400 or 422 otherwise).
payout_request parse_payout(const std::string& body);

// The payout provider's API over HTTP (http://host:port): it dedupes by the
// Idempotency-Key each call sends.
class provider_client {
public:
    explicit provider_client(std::string url) : url_(std::move(url)) {}
    // POST /payouts: "paid <provider id>" or "declined <reason>", its final
    // answers; anything else (no answer, 409, 429, 5xx) throws, and the call
    // is made again later with the same key.
    std::string pay(const std::string& payout, const payout_request& p, const std::string& key) const;
    // POST /payouts/cancel: "cancelled" when the payout sent with
    // `payout_key` was not made (the provider refuses it from then on), or
    // "paid <provider id>" when it was (a payout made is never undone); throws
    // otherwise.
    std::string cancel(const std::string& payout_key, const std::string& key) const;

private:
    std::string url_;
};

inline constexpr const char* payout_namespace = "payments.payout";

// The payout operation: its input the request's body, its answer the HTTP
// response (201 paid, 422 declined or refused, 502 cancelled after failing).
[[nodiscard]] idem::operation<idem::http::response> payout_operation(
    const provider_client& provider, std::shared_ptr<const idem::result_codec<idem::http::response>> codec);

}  // namespace payments
