// Names the example in include/idem/execution.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/executor.hpp"

extern idem::executor& exec;
extern const idem::record_key key;
extern const std::string fingerprint;
std::string operation();
extern const idem::string_codec codec;
std::string retry_later();
std::string reject();
std::string gone();
