// idem/store_registry.hpp: the SQL stores this build has, found by the backend
// a database URL names. Each SQL store library registers its factory as it
// loads; idem::database::open and the `idem` command open what a URL names
// through open_store, so another SQL database is one store library (its
// folder under stores/) and its migrations, with no switch anywhere else.
//
//   auto url = idem::database_url::parse("sqlite:bank.db");
//   idem::opened_store s = idem::open_store(url, {.pool_size = 1, .access = idem::store_access::existing});
//   s.admin->purge_batch(1000, std::chrono::hours(1));
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "idem/database_url.hpp"
#include "idem/export.hpp"
#include "idem/sqlite_options.hpp"
#include "idem/store_admin.hpp"
#include "idem/transactional_record_store.hpp"

namespace soci {
class session;
}

namespace idem {

enum class store_access {
    create,     // a missing database is created (SQLite: a new file), not migrated
    existing,   // a missing database is store_error(schema) naming it, never a new empty one
    read_only,  // as existing, and nothing is written (SQLite opens the file read-only)
};

// What opening asks of a store. Each store reads the fields that concern it.
struct IDEM_API store_request {
    std::size_t pool_size = 4;  // the store's own connections (its detached view)
    store_access access = store_access::create;
    // SQLite: every connection's busy timeout and synchronous level (the store's and the sessions').
    sqlite_connection_options sqlite = {};
    // PostgreSQL behind a pooler in transaction mode (postgresql_store_options::transaction_pooler).
    bool transaction_pooler = false;
};

// An opened store: the record store, its operator's face, and how to open a
// business session on the same database, configured as the store wants it.
struct IDEM_API opened_store {
    std::shared_ptr<transactional_record_store> store;
    store_admin* admin = nullptr;  // the same object as `store`
    std::function<void(soci::session&)> open_session;
};

using store_factory = std::function<opened_store(const database_url& url, const store_request& request)>;

// Makes `factory` open every URL of `backend`; a later registration replaces it.
IDEM_API void register_store(database_url::backend backend, store_factory factory);

// Opens the store `url` names: std::invalid_argument when this build links no
// store for its backend (naming the library to link), options_error or
// std::invalid_argument for bad options, store_error when it cannot be opened.
[[nodiscard]] IDEM_API opened_store open_store(const database_url& url, const store_request& request = {});

}  // namespace idem
