// Names the example in include/idem/idem.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

extern const idem::record_key key;
extern const std::string fingerprint;
std::string work();
