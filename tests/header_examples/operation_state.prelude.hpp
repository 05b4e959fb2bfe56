// Names the example in include/idem/operation_state.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include "idem/database.hpp"
#include "idem/operations.hpp"

extern idem::database& db;
extern const idem::record_key key;
template <class... T>
void print(const T&...);
