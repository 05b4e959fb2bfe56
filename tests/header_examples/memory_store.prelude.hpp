// Names the example in include/idem/memory_store.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include "idem/executor.hpp"
