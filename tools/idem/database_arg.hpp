// --db URL: which store and where, and opening it for the admin commands. The
// forms are those of the stores the command links (idem::database_url_forms()).
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <string_view>

#include "idem/database_url.hpp"
#include "idem/error.hpp"
#include "idem/store_admin.hpp"
#include "idem/store_registry.hpp"

namespace idem::cli {

// The library's one grammar (idem/database_url.hpp), shared with idem::database.
using idem::database_url;
using idem::database_url_forms;

// Adds the --db option of a command that opens a store (required unless the
// command names its store another way).
void add_database_option(CLI::App& command, std::string& url, bool required = true);

// database_url::parse: std::invalid_argument naming the accepted forms for
// anything else. The message never repeats the value: a URI may carry a password.
[[nodiscard]] inline database_url parse_database_url(std::string_view text) {
    return database_url::parse(text);
}

enum class open_mode {
    create,     // migrate: a missing SQLite file is created
    existing,   // purge: a missing SQLite file is a command_error, not a new empty database
    read_only,  // inspect, purge --dry-run: as existing, and nothing is written (not even the journal mode)
};

// A failure of a command, worded for the operator (what went wrong, then what
// to do next); printed as it is, exit code 1.
class command_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The message of `failure` on `url`, ending with what the operator can do about it.
[[nodiscard]] std::string explain(const store_error& failure, const database_url& url);

// Runs `work` (which opens the store behind `url` and uses it): a store_error
// comes out as a command_error that says what to do next.
template <class Work>
auto on_database(const database_url& url, Work&& work) {
    try {
        return work();
    } catch (const store_error& e) {
        throw command_error(explain(e, url));
    }
}

// The store behind `url`, not migrated, through the store registry: use its
// .admin. store_error when it cannot be opened (a missing SQLite file too, unless
// `mode` creates it); std::invalid_argument when this build has no store for it.
[[nodiscard]] opened_store open_store(const database_url& url, open_mode mode);

}  // namespace idem::cli
