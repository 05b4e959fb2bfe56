// Names the example in include/idem/export.hpp uses and does not declare (tests/header_examples.py).
#pragma once

// namespace scope: 1
#include <memory>
#include <string>
#include <string_view>
#include "idem/export.hpp"
