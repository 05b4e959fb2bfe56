// The bank of bank_places.hpp as mapped types (idem/mapping.hpp): its accounts
// (no version column: read FOR UPDATE on PostgreSQL) and transfers, and a
// versioned account in a table of its own.
#pragma once

#include <string>

#include "bank_places.hpp"
#include "idem/mapping.hpp"

namespace bank {

struct account {
    std::string id;
    long long balance = 0;
};

struct transfer {
    std::string id;
    std::string from, to;
    long long amount = 0;
};

struct versioned_account {
    std::string id;
    long long balance = 0;
    long long version = 0;
};

}  // namespace bank

template <>
struct idem::mapping<bank::account> {
    static constexpr auto table = "accounts";
    static constexpr auto columns =
        idem::columns(idem::key("id", &bank::account::id), idem::column("balance", &bank::account::balance));
};

template <>
struct idem::mapping<bank::transfer> {
    static constexpr auto table = "transfers";
    static constexpr auto columns =
        idem::columns(idem::key("id", &bank::transfer::id), idem::column("from_account", &bank::transfer::from),
                      idem::column("to_account", &bank::transfer::to), idem::column("amount", &bank::transfer::amount));
};

template <>
struct idem::mapping<bank::versioned_account> {
    static constexpr auto table = "versioned_accounts";
    static constexpr auto columns = idem::columns(idem::key("id", &bank::versioned_account::id),
                                                  idem::column("balance", &bank::versioned_account::balance),
                                                  idem::version("version", &bank::versioned_account::version));
};
