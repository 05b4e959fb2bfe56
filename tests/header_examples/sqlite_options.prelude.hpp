// Names the example in include/idem/sqlite_options.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include "idem/database.hpp"
