// Names the example in include/idem/clock.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include "idem/memory_store.hpp"

extern const idem::record_key key;
