// Names the example in include/idem/database.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

#include <string>

extern const std::string request_key, fingerprint, from;
extern const long long amount;
