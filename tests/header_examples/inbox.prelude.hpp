// Names the example in include/idem/inbox.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

#include <string>

#include "idem/database.hpp"

struct message {
    std::string id, tenant;
};
extern idem::database& db;
extern const message msg;
void record_invoice(soci::session& sql, const message& m);
void ack(const message& m);
void redeliver_later(const message& m);
