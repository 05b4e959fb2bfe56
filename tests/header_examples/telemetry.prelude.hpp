// Names the example in include/idem/telemetry.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <iostream>
#include <string>

#include "idem/executor.hpp"

extern std::shared_ptr<idem::record_store> store;
void serve(const std::string& path, const std::string& body);
