// Names the example in include/idem/operation.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/database.hpp"

extern idem::database& db;
extern const std::string key;
extern const std::string fingerprint;
extern const std::string body;
struct payout_request {
    long long amount;
};
payout_request parse(const std::string& input);
long long hold(idem::unit_of_work& uow, const payout_request& p);
std::string settle(idem::unit_of_work& uow, const payout_request& p, const std::string& sent);
std::string undo(idem::steps& op, const payout_request& p);
struct provider_client {
    std::string pay(const payout_request& p, const std::string& call_key);
};
extern provider_client provider;
