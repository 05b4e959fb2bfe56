// Names the example in include/idem/keys.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

extern const std::string order_id, refund_id, message_id, header_value;
