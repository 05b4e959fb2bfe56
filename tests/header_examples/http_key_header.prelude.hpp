// Names the example in include/idem/http/key_header.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

extern const std::vector<std::string_view> values;
extern const std::string key;
extern std::multimap<std::string, std::string> headers;
void use(const std::string& key);
