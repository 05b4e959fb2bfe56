// Names the example in include/idem/sqlite_store.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

#include <string>

#include "idem/transaction_runner.hpp"

extern idem::sqlite_store& store;  // the second example's; the first declares its own
extern const idem::record_key key;
extern const std::string fingerprint;
