// Names the example in include/idem/http/fingerprint.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>
#include <vector>

extern const std::string body;
extern const std::vector<idem::http::form_part> parts;
