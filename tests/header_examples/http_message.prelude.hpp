// Names the example in include/idem/http/message.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string_view>

#include "idem/http/layer.hpp"

extern idem::http::idempotency_layer& layer;
extern const std::string_view raw_body;
idem::http::response run_endpoint();
