// Names the example in include/idem/error.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string_view>

#include "idem/record_store.hpp"

extern idem::record_store& store;
extern const idem::record_key key;
extern const std::string fingerprint;
extern const idem::duration lease;
void retry_later();
void log(std::string_view message, std::string_view native_code);
