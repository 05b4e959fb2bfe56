// Names the example in stores/mariadb/include/idem/mariadb_store.hpp uses and does not declare
// (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

#include <string>

#include "idem/database.hpp"

extern const idem::record_key key;
extern const std::string fingerprint;
std::string move_money(soci::session& sql);
