// Names the example in include/idem/purge.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <cstddef>

#include "idem/database.hpp"

extern idem::database& db;
void log(std::size_t deleted);
void log(std::size_t deleted, std::size_t batches, bool stopped_at_max_rows);
