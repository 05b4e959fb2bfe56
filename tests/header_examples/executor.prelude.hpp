// Names the example in include/idem/executor.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/memory_store.hpp"

extern const std::string tenant, request_key, request_hash, order;
std::string capture(const std::string& order);
extern const idem::result_codec<std::string>& receipt_codec;
void respond(const std::string& receipt);
