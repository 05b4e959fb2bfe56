// Names the example in include/idem/outbox_relay.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <string>

#include "idem/database.hpp"

extern idem::database& db;
struct broker_client {
    void send(const std::string& topic, const std::string& id, const std::string& payload);
};
extern broker_client broker;
