// Names the example in include/idem/mode.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <map>
#include <string>

#include "idem/options.hpp"

extern std::map<std::string, std::string> config;
extern idem::executor_options options;
