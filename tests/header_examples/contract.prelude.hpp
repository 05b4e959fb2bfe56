// Names the example in include/idem/contract.hpp uses and does not declare (tests/header_examples.py).
#pragma once

// namespace scope: 1
#include "idem/memory_store.hpp"

using my_store = idem::memory_store;  // the store you test
