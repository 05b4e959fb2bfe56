// Names the example in include/idem/unit_of_work.hpp uses and does not declare (tests/header_examples.py).
#pragma once

#include <soci/soci.h>

#include "idem/database.hpp"

extern idem::database& db;
void write_optional_audit_row(soci::session& sql);

#include <string>

#include "idem/mapping.hpp"

struct account {
    std::string id;
    long long balance = 0;
};
template <>
struct idem::mapping<account> {
    static constexpr auto table = "accounts";
    static constexpr auto columns = std::tuple(key("id", &account::id), column("balance", &account::balance));
};
