// idem/store_registry.hpp: the stores this program links, found by the scheme
// a database URL names. Each store library registers, as it loads, the URL
// forms it answers and the factory that opens them; database_url::parse,
// idem::database::open and the `idem` command read and open URLs through here
// only, so another database is one store library (its folder under stores/)
// and its migrations, with no line anywhere else.
//
//   auto url = idem::database_url::parse("sqlite:bank.db");
//   idem::opened_store s = idem::open_store(url, {.pool_size = 1, .access = idem::store_access::existing});
//   s.admin->purge_batch(1000, std::chrono::hours(1));
//
//   // A store library's registration, run as it loads (open_demo: its factory's work).
//   idem::register_store({.scheme = "demo", .display_name = "Demo", .prefixes = {"demo://"},
//                         .description = "demo://NAME"},
//                        [](const idem::database_url& u, const idem::store_request&) {
//                            return open_demo(u.location);
//                        });
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
    // A server's store (PostgreSQL, MariaDB): a transaction of its own connections
    // whose server has sent nothing this long is ended (database_options::answer_timeout).
    std::chrono::milliseconds answer_timeout{30'000};
};

// An opened store: the record store, its operator's face, and how to open a
// business session on the same database, configured as the store wants it.
struct IDEM_API opened_store {
    std::shared_ptr<transactional_record_store> store;
    store_admin* admin = nullptr;  // the same object as `store`
    std::function<void(soci::session&)> open_session;
};

using store_factory = std::function<opened_store(const database_url& url, const store_request& request)>;

// How a store's URLs are written, and what of them it opens.
struct IDEM_API store_url_form {
    // database_url::scheme of every URL it answers, and its name ("sqlite").
    std::string scheme;
    // Its name for people, in messages ("SQLite").
    std::string display_name = {};
    // What its URLs open with ("sqlite:"; "postgresql://", "postgres://").
    std::vector<std::string> prefixes = {};
    // Its forms without a prefix (a path ending in .db; libpq keywords), if any.
    std::function<bool(std::string_view text)> recognises = {};
    // What it opens, from the whole text of one of its URLs (the text itself
    // when empty): std::invalid_argument saying what is wrong ("URL sqlite:
    // needs a path"), which database_url::parse completes with the accepted
    // forms; it never repeats the text.
    std::function<std::string(std::string_view text)> location = {};
    // Its forms, for help texts and error messages (database_url_forms).
    std::string description = {};
    // The location is a file path, which messages may show; any other (a URI,
    // keywords) may carry a password and is never repeated.
    bool location_is_path = false;
};

// Makes `factory` open every URL of `form`: a later registration of the same
// scheme replaces it, and a prefix two stores register opens the later one's.
// std::invalid_argument for a form without a scheme or without a factory.
IDEM_API void register_store(store_url_form form, store_factory factory);

// The form the store answering `scheme` registered; std::nullopt when none did.
[[nodiscard]] IDEM_API std::optional<store_url_form> registered_store(std::string_view scheme);

// Opens the store `url` names: std::invalid_argument when this program links no
// store for its scheme, options_error or std::invalid_argument for bad options,
// store_error when it cannot be opened.
[[nodiscard]] IDEM_API opened_store open_store(const database_url& url, const store_request& request = {});

}  // namespace idem
