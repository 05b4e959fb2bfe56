// Names the example in include/idem/reseal.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <cstddef>

#include "idem/database.hpp"

extern idem::database& db;
void log(std::size_t read, std::size_t resealed);
