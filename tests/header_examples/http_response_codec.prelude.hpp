// Names the example in include/idem/http/response_codec.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include "idem/http/layer.hpp"

extern idem::http::idempotency_layer& layer;
extern const idem::http::response res;
