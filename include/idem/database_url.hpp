// idem/database_url.hpp: the one grammar for naming a database.
//
// idem::database::open, the `idem` command and the examples all read it here.
// The forms are the stores': each store library registers the URLs it answers
// (idem/store_registry.hpp) as it loads, so a program reads the forms of the
// stores it links, and a new store needs no line here.
//
//   auto url = idem::database_url::parse("sqlite:bank.db");        // {"sqlite", "bank.db"} (idem-sqlite)
//   idem::database_url::parse("/var/lib/bank/ledger.db");           // a path ending in .db: the same store
//   idem::database_url::parse("postgresql://app@db/bank");          // {"postgresql", the URI} (idem-postgresql)
//   idem::database_url::parse("host=db dbname=bank user=app");      // libpq keywords: the same store
//   idem::database_url::parse("xyz://x");  // std::invalid_argument naming the accepted forms
//   std::string help = "The database: " + idem::database_url_forms();
#pragma once

#include <string>
#include <string_view>

#include "idem/export.hpp"

namespace idem {

struct IDEM_API database_url {
    // The store that answers it, by the name it registered ("sqlite", "postgresql").
    std::string scheme = {};
    // What that store opens: the file path (SQLite), the connection string as libpq takes it (PostgreSQL).
    std::string location = {};

    // The form of the registered store that answers `text`. std::invalid_argument
    // naming what was wrong and the accepted forms for anything else (an
    // unknown scheme, a form no store answers, or one two stores would answer);
    // the message never repeats `text`, which may carry a password.
    [[nodiscard]] static database_url parse(std::string_view text);
};

// The forms the stores this program links accept, for help texts and error messages.
[[nodiscard]] IDEM_API std::string database_url_forms();

}  // namespace idem
