// Names the example in include/idem/redis_store.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

extern const std::string secret, fingerprint;
extern const idem::record_key key;
