// Names the example in include/idem/http/client.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <httplib.h>

#include <string>

void use(int status, const std::string& body);
