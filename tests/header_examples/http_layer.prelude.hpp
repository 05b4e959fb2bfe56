// Names the example in include/idem/http/layer.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string_view>

#include "idem/database.hpp"

extern idem::database& db;
extern const idem::http::request req;
idem::http::response create_payment(idem::unit_of_work& uow, std::string_view body);
