// Names the example in include/idem/http/httplib.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "idem/database.hpp"

extern idem::database& db;
extern httplib::Server server;
extern std::shared_ptr<idem::telemetry_sink> telemetry;
std::string create_payment(idem::unit_of_work& uow, const std::string& body);
idem::claims verify_token(const httplib::Request& req);
