// Names the example in include/idem/unit_of_work.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

#include "idem/database.hpp"

extern idem::database& db;
void write_optional_audit_row(soci::session& sql);
