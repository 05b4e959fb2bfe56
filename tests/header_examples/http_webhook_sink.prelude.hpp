// Names the example in include/idem/http/webhook_sink.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/database.hpp"

extern idem::database& db;
extern const std::string current_secret, previous_secret;
