// Names the example in include/idem/webhook.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/database.hpp"
#include "idem/executor.hpp"

extern idem::executor& exec;
extern idem::database& runner;  // the example's name for the database its handler runs on
extern const std::string current_secret, previous_secret;
struct incoming {
    std::string body;
};
extern const incoming req;
extern const std::vector<std::pair<std::string_view, std::string_view>> headers;
struct response {
    int status;
};
extern response res;
idem::webhook::handler_result apply(idem::unit_of_work& uow, std::string_view body);
