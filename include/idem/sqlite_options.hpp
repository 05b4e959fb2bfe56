// idem/sqlite_options.hpp: how idem configures a SQLite connection, for the
// store's own (sqlite_store_options) and the business sessions of an
// idem::database opened on a SQLite file (database_options::sqlite).
//
//   idem::database::open("sqlite:bank.db", {.sqlite = {.synchronous = idem::sqlite_synchronous::normal}});
#pragma once

#include <chrono>

#include "idem/export.hpp"

namespace idem {

enum class sqlite_synchronous { off, normal, full, extra };

struct IDEM_API sqlite_connection_options {
    // How long a writer waits for the write lock before store_error(timeout).
    std::chrono::milliseconds busy_timeout{5000};
    // In WAL mode `normal` survives a crash of the process but may lose the
    // last commits on power loss; `full` does not.
    sqlite_synchronous synchronous = sqlite_synchronous::full;
    // Opens an existing file read-only and leaves its journal mode as it is:
    // for looking only (`idem inspect`, `idem purge --dry-run`); writes are store_error.
    bool read_only = false;
};

}  // namespace idem
