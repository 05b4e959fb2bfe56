// Names the example in include/idem/encryption.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/database.hpp"

extern const std::string new_key_hex, old_key_hex, url;
