// Names the example in include/idem/completer.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/database.hpp"
#include "idem/operation.hpp"

extern idem::database& db;
extern const idem::operation<std::string> payout;
extern const idem::operation<long long> refund;
