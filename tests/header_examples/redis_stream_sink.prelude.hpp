// Names the example in include/idem/redis_stream_sink.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include "idem/database.hpp"

extern idem::database& db;
