// Names the example in include/idem/mapping.hpp uses and does not declare (tests/header_examples.py).
// namespace scope: 1
#pragma once

#include <string>

#include "idem/unit_of_work.hpp"

extern idem::unit_of_work& uow;
