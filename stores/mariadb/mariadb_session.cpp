// Opening MariaDB sessions, the store's own and the application's: a
// mariadb:// URL as SOCI's mysql backend takes it, and the settings idem
// needs on every session whatever the server's defaults are (those of a
// fresh server are latin1 with a case-insensitive collation, and REPEATABLE READ).
#include <soci/mysql/soci-mysql.h>
#include <soci/session.h>

#include <cctype>
#include <chrono>
#include <stdexcept>
#include <string>

#include "idem/error.hpp"
#include "idem/mariadb_store.hpp"
#include "mariadb_native.hpp"
#include "sql/soci_errors.hpp"

namespace idem {
namespace {

// Runners know MariaDB, and the store registry opens mariadb:// and mysql://
// URLs, as soon as this library is loaded (a static link keeps this file with
// open_mariadb_session, which every use of the store calls).
const bool installed = (detail::mariadb::install_dialect(), detail::mariadb::register_store(), true);

[[noreturn]] void malformed(std::string_view why) {
    // The form is named in words: a message with an at sign could be taken
    // for one that repeats a URL's credentials.
    throw std::invalid_argument("idem: the MariaDB URL " + std::string(why) +
                                "; use mariadb:// (or mysql://), then the user and password, the host and port, "
                                "and /DATABASE, with ?unix_socket=PATH for a local socket");
}

// %XX escapes, as in a URL's user, password and database.
std::string decoded(std::string_view part) {
    std::string out;
    for (std::size_t i = 0; i < part.size(); ++i) {
        if (part[i] != '%') {
            out += part[i];
            continue;
        }
        if (i + 2 >= part.size() || !std::isxdigit(static_cast<unsigned char>(part[i + 1])) ||
            !std::isxdigit(static_cast<unsigned char>(part[i + 2])))
            malformed("has a malformed %-escape");
        out += static_cast<char>(std::stoi(std::string(part.substr(i + 1, 2)), nullptr, 16));
        i += 2;
    }
    return out;
}

// A value in SOCI's connection string: quoted, its quotes and backslashes escaped.
std::string quoted(const std::string& value) {
    std::string out = "'";
    for (char c : value) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out + "'";
}

// On a Galera node (wsrep_on), a session reads causally: each read waits until
// the node has applied every write the cluster certified before it
// (wsrep_sync_wait bit 1, added to the server's own bits). Without it, a key's
// record committed through another node a moment ago could read as absent here:
// the work would run again and fail certification at COMMIT, a wasted run.
// A node set otherwise than Galera requires (row-based replication, interleaved
// auto-increment locks) is refused: its replicas could diverge.
void join_galera(soci::session& session) {
    std::string name, value, wsrep_on, binlog_format, autoinc_lock_mode;
    soci::statement read = (session.prepare << "SHOW VARIABLES WHERE Variable_name IN ('wsrep_on', 'binlog_format', "
                                               "'innodb_autoinc_lock_mode')",
                            soci::into(name), soci::into(value));
    read.execute();
    while (read.fetch()) {
        if (name == "wsrep_on") wsrep_on = value;
        if (name == "binlog_format") binlog_format = value;
        if (name == "innodb_autoinc_lock_mode") autoinc_lock_mode = value;
    }
    if (wsrep_on != "ON") return;
    if (binlog_format != "ROW" || autoinc_lock_mode != "2")
        throw store_error(store_failure::unsupported,
                          "idem: this Galera node runs with binlog_format=" + binlog_format +
                              " and innodb_autoinc_lock_mode=" + autoinc_lock_mode +
                              "; Galera keeps its nodes alike only with ROW and 2");
    session << "SET SESSION wsrep_sync_wait = @@GLOBAL.wsrep_sync_wait | 1";
}

}  // namespace

std::string detail::mariadb::soci_connection_string(std::string_view url) {
    std::string_view rest;
    for (std::string_view scheme : {"mariadb://", "mysql://"})
        if (url.starts_with(scheme)) rest = url.substr(scheme.size());
    if (rest.data() == nullptr) malformed("does not begin with mariadb:// or mysql://");
    std::string_view query;
    if (const auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
    }
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos || slash + 1 == rest.size()) malformed("names no database");
    std::string_view authority = rest.substr(0, slash);
    const std::string database = decoded(rest.substr(slash + 1));
    if (database.find('/') != std::string::npos) malformed("has more than one path segment");
    std::string text = "db=" + quoted(database);
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        const std::string_view credentials = authority.substr(0, at);
        authority = authority.substr(at + 1);
        const auto colon = credentials.find(':');
        text += " user=" + quoted(decoded(credentials.substr(0, colon)));
        if (colon != std::string_view::npos) text += " password=" + quoted(decoded(credentials.substr(colon + 1)));
    }
    std::string_view host = authority;
    if (const auto colon = authority.rfind(':'); colon != std::string_view::npos && authority.back() != ']') {
        host = authority.substr(0, colon);
        const std::string_view port = authority.substr(colon + 1);
        if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
            std::stoi(std::string(port)) > 65535)
            malformed("has a port that is not a number from 0 to 65535");
        text += " port=" + std::string(port);
    }
    if (!host.empty()) text += " host=" + quoted(decoded(host));
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        const auto equals = pair.find('=');
        if (equals == std::string_view::npos) malformed("has a parameter without a value");
        const std::string_view name = pair.substr(0, equals);
        if (name != "unix_socket" && name != "connect_timeout" && name != "read_timeout" && name != "write_timeout" &&
            name != "sslca" && name != "sslcert" && name != "sslkey")
            malformed("has an unknown parameter (" + std::string(name.substr(0, 20)) + ")");
        text.append(" ").append(name).append("=").append(quoted(decoded(pair.substr(equals + 1))));
    }
    // Text is utf8mb4 whatever the server's default; a dead server is noticed within the timeouts.
    if (text.find(" connect_timeout=") == std::string::npos) text += " connect_timeout=10";
    if (text.find(" read_timeout=") == std::string::npos) text += " read_timeout=30";
    if (text.find(" write_timeout=") == std::string::npos) text += " write_timeout=30";
    return text + " charset=utf8mb4";
}

void open_mariadb_session(soci::session& session, const std::string& connection,
                          std::chrono::seconds lock_wait_timeout) {
    const std::string parameters = detail::mariadb::soci_connection_string(connection);
    if (lock_wait_timeout.count() < 1) throw std::invalid_argument("idem: lock_wait_timeout must be at least 1 s");
    try {
        session.open(soci::mysql, parameters);
        // Strict: a value that does not fit is an error, never a silent cut.
        // READ COMMITTED: a unit of work that names no level reads what is
        // committed now (its locking reads do anyway under any level);
        // NO PAD binary comparison of the session's own literals.
        session << "SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ZERO_DATE,"
                   "NO_ENGINE_SUBSTITUTION', SESSION tx_isolation = 'READ-COMMITTED', "
                   "SESSION innodb_lock_wait_timeout = " +
                       std::to_string(lock_wait_timeout.count()) +
                       ", NAMES utf8mb4 COLLATE utf8mb4_nopad_bin, SESSION time_zone = '+00:00'";
        join_galera(session);
    } catch (const soci::soci_error&) {
        detail::rethrow_soci_as_store_error("connecting to MariaDB", &session);
    }
}

}  // namespace idem
