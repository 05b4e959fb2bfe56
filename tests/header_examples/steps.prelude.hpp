// Names the example in include/idem/steps.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/database.hpp"

extern idem::database& db;
extern const idem::record_key key;
extern const std::string fingerprint;
extern const long long amount;
long long hold_funds(idem::unit_of_work& uow, long long amount);
std::string charge_card(const std::string& call_key);
std::string settle(idem::unit_of_work& uow, long long hold, const std::string& charge);
