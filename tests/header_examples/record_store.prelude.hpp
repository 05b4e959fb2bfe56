// Names the example in include/idem/record_store.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

extern idem::record_store& store;
extern const idem::record_key key;
extern const std::string fingerprint;
std::string do_the_work();
