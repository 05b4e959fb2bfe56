// Names the example in include/idem/transactional_record_store.hpp uses and does not declare
// (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

#include <string>

#include "idem/transaction_runner.hpp"

extern idem::transaction_runner& runner;
extern idem::transactional_record_store& store;
extern const idem::record_key key;
extern const std::string fp, receipt;
void move_money(soci::session& session);
