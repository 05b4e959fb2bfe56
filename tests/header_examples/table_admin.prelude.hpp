// Names the example in include/idem/table_admin.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <chrono>

#include "idem/record_key.hpp"

extern const idem::record_key key;
void alert(const idem::operation_state& s);
void log(const char* what);
