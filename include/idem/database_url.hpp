// idem/database_url.hpp: the one grammar for naming a database.
//
// idem::database::open, the `idem` command and the examples all read it here:
//
//   auto url = idem::database_url::parse("sqlite:bank.db");             // SQLite file bank.db
//   idem::database_url::parse("/var/lib/bank/ledger.db");                // a path ending in .db
//   idem::database_url::parse("postgresql://app@db/bank");               // PostgreSQL URI
//   idem::database_url::parse("host=db dbname=bank user=app");           // libpq keywords
//   idem::database_url::parse("mysql://x");  // std::invalid_argument naming the accepted forms
#pragma once

#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem {

struct IDEM_API database_url {
    enum class backend { sqlite, postgresql };

    backend kind = backend::sqlite;
    // The file path (SQLite), or the connection string as libpq takes it (PostgreSQL).
    std::string location = {};

    // std::invalid_argument, naming what was wrong and the accepted forms, for anything else.
    [[nodiscard]] static database_url parse(std::string_view text);
};

// The accepted forms, for help texts and error messages.
inline constexpr std::string_view database_url_forms =
    "sqlite:PATH (or sqlite:///ABSOLUTE/PATH), a path ending in .db, .sqlite or .sqlite3, "
    "postgresql://... or postgres://..., or libpq keywords such as \"host=db dbname=bank\"";

}  // namespace idem
