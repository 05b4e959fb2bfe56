// Names the example in include/idem/operations.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <chrono>
#include <iostream>

#include "idem/database.hpp"

extern idem::database& db;
extern const idem::record_key key;
void alert(const idem::operation_state& s);
