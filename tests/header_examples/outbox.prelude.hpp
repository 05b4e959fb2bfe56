// Names the example in include/idem/outbox.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/database.hpp"

extern idem::database& db;
extern const idem::record_key key;
extern const std::string fingerprint, transfer_json;
struct transfer_row {
    std::string from;
};
extern const transfer_row transfer;
void move_money(idem::unit_of_work& uow, const transfer_row& t);
