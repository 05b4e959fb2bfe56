// Opening and configuring SQLite connections: the store's own and the application's.
#include <soci/session.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "idem/sqlite_store.hpp"
#include "sql/soci_errors.hpp"
#include "sqlite_native.hpp"
#include "writer_gate.hpp"

namespace idem {
namespace {

using namespace std::chrono_literals;

// Runners know SQLite, through its native handle, and the store registry opens sqlite:
// URLs, as soon as this library is loaded (a static link keeps this file with
// open_sqlite_session, which every use of the store calls).
const bool installed = (detail::sqlite::install_dialect(), detail::sqlite::register_store(), true);

const char* synchronous_pragma(sqlite_synchronous level) {
    switch (level) {
        case sqlite_synchronous::off: return "PRAGMA synchronous = OFF";
        case sqlite_synchronous::normal: return "PRAGMA synchronous = NORMAL";
        case sqlite_synchronous::full: return "PRAGMA synchronous = FULL";
        case sqlite_synchronous::extra: return "PRAGMA synchronous = EXTRA";
    }
    throw std::invalid_argument("idem: unknown sqlite_synchronous level");
}

std::string journal_mode(detail::sqlite::database* db, const char* sql) {
    detail::sqlite::statement pragma(db, sql, "setting the WAL journal mode");
    detail::sqlite::statement_use use(pragma);
    const auto mode = use->step() ? use->column_text(0) : std::nullopt;
    return mode ? std::string(*mode) : std::string();
}

// Switching a new file to WAL needs an exclusive lock, and SQLite does not call
// the busy handler for it when that could deadlock (another connection opening
// the same new file), so retry here within the busy timeout.
void set_wal(detail::sqlite::database* db, std::chrono::milliseconds busy_timeout) {
    const auto deadline = std::chrono::steady_clock::now() + busy_timeout;
    for (;;) {
        try {
            if (journal_mode(db, "PRAGMA journal_mode") == "wal") return;
            // The pragma answers with the mode in force: anything but "wal" (an
            // in-memory database, a read-only file) cannot give concurrent writers.
            if (journal_mode(db, "PRAGMA journal_mode = WAL") == "wal") return;
            throw store_error(store_failure::unsupported, "idem: the SQLite database cannot use the WAL journal mode");
        } catch (const store_error& e) {
            if (e.failure() != store_failure::timeout || std::chrono::steady_clock::now() >= deadline) throw;
        }
        std::this_thread::sleep_for(1ms);
    }
}

// Opening fails this way for a path that is wrong, not for a passing fault:
// retrying cannot help, so it is not transient.
store_error cannot_open(const std::string& path, bool read_only, int result_code) {
    std::error_code ec;
    const std::filesystem::path file(path);
    const std::filesystem::path directory = file.has_parent_path() ? file.parent_path() : ".";
    std::string why;
    if (!std::filesystem::is_directory(directory, ec))
        why = "the directory " + directory.string() + " does not exist";
    else if (read_only && !std::filesystem::exists(file, ec))
        why = "there is no such file";
    else
        why = "it cannot be opened (permissions?)";
    return store_error(store_failure::other, "idem: cannot open the SQLite database " + path + ": " + why,
                       std::to_string(result_code));
}

}  // namespace

void configure_sqlite_session(soci::session& session, const sqlite_connection_options& options) {
    if (options.busy_timeout < 0ms) throw std::invalid_argument("idem: busy_timeout must not be negative");
    // Compared in milliseconds: the deadline below is in nanoseconds, which cannot hold milliseconds::max().
    if (options.busy_timeout > std::chrono::floor<std::chrono::milliseconds>(max_duration))
        throw std::invalid_argument("idem: busy_timeout must be at most 100 years");
    detail::sqlite::database* db = detail::sqlite::native_handle(session);
    // First, so that the pragmas below wait for a concurrent opener too.
    detail::sqlite::attach_settings(db, options.busy_timeout, options.read_only);
    if (!options.read_only) set_wal(db, options.busy_timeout);
    detail::sqlite::execute(db, synchronous_pragma(options.synchronous), "setting the synchronous level");
}

void open_sqlite_session(soci::session& session, const std::string& path, const sqlite_connection_options& options) {
    if (path.empty()) throw std::invalid_argument("idem: the SQLite database path is empty");
    // SOCI's connection string quotes with '"' and cannot escape it.
    if (path.find('"') != std::string::npos)
        throw std::invalid_argument("idem: the SQLite database path contains '\"'");
    try {
        session.open(*soci::factory_sqlite3(), "db=\"" + path + "\"" + (options.read_only ? " readonly=1" : ""));
    } catch (const soci::sqlite3_soci_error& e) {
        if ((e.result() & 0xff) == SQLITE_CANTOPEN) throw cannot_open(path, options.read_only, e.result());
        throw detail::sqlite::error(e.result(), "opening the SQLite database");
    } catch (...) {
        detail::rethrow_soci_as_store_error("opening the SQLite database");
    }
    configure_sqlite_session(session, options);
}

}  // namespace idem
