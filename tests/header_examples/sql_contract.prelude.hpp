// Names the example in include/idem/sql_contract.hpp uses and does not declare (tests/header_examples.py).
#pragma once

// namespace scope: 1

#include <memory>

std::shared_ptr<idem::transactional_record_store> open_my_store();  // your store, on the suite's database
void open_my_session(soci::session& session);                       // another session on that database
