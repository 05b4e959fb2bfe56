// Names the example in include/idem/store_registry.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

idem::opened_store open_demo(const std::string& location);
