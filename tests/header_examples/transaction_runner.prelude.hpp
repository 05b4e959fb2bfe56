// Names the example in include/idem/transaction_runner.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

extern soci::session& session;
