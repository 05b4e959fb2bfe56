#include "mariadb_server.hpp"

#include <mysql.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "free_port.hpp"

#ifndef IDEM_MARIADBD
#define IDEM_MARIADBD "/usr/sbin/mariadbd"
#endif
#ifndef IDEM_MARIADB_INSTALL_DB
#define IDEM_MARIADB_INSTALL_DB "/usr/bin/mariadb-install-db"
#endif

namespace idem::test {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------
// URLs and SOCI's connection strings

bool unreserved(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

// `keep`: characters that may stay as they are besides the unreserved ones ('/' in a query value).
std::string percent_encode(std::string_view text, std::string_view keep = {}) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (char c : text) {
        if (unreserved(c) || keep.find(c) != std::string_view::npos) {
            out += c;
        } else {
            const auto byte = static_cast<unsigned char>(c);
            out += '%';
            out += hex[byte >> 4];
            out += hex[byte & 15];
        }
    }
    return out;
}

std::string percent_decode(std::string_view text) {
    const auto digit = [&](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw std::invalid_argument("mariadb URL: a bad percent-encoding in '" + std::string(text) + "'");
    };
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        if (i + 2 >= text.size())
            throw std::invalid_argument("mariadb URL: a truncated percent-encoding in '" + std::string(text) + "'");
        out += static_cast<char>(digit(text[i + 1]) * 16 + digit(text[i + 2]));
        i += 2;
    }
    return out;
}

// A value as SOCI's mysql backend reads it: bare up to the next space, or in
// single quotes with backslash escapes.
std::string soci_value(std::string_view value) {
    bool plain = !value.empty();
    for (char c : value)
        if (c == ' ' || c == '\t' || c == '\n' || c == '\'' || c == '\\') plain = false;
    if (plain) return std::string(value);
    std::string out = "'";
    for (char c : value) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out + "'";
}

// ---------------------------------------------------------------------------
// The server's housekeeping, through libmariadb's C API

// libmariadb's global state, set up before the first connection and released
// after the last (at exit, after the statics that connect in their destructors).
void init_client_library() {
    struct library {
        library() {
            if (mysql_library_init(0, nullptr, nullptr) != 0) throw std::runtime_error("mysql_library_init failed");
        }
        ~library() { mysql_library_end(); }
        library(const library&) = delete;
        library& operator=(const library&) = delete;
    };
    static const library once;
}

using connection_ptr = std::unique_ptr<MYSQL, decltype(&mysql_close)>;

// A connection to `address`, or null with the reason in `error`. Reads no
// option file (libmariadb reads one only when asked), so a my.cnf cannot send
// it to another server. `timeout` bounds the connect and each read and write:
// a stopped (SIGSTOP) server makes it fail, not hang.
connection_ptr try_connect(const mariadb_address& address, unsigned timeout, std::string& error) {
    init_client_library();
    connection_ptr conn(mysql_init(nullptr), &mysql_close);
    if (!conn) throw std::runtime_error("mysql_init failed");
    mysql_optionsv(conn.get(), MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_optionsv(conn.get(), MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_optionsv(conn.get(), MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    const char* socket = nullptr;
    for (const auto& [key, value] : address.options)
        if (key == "unix_socket") socket = value.c_str();
    const auto text = [](const std::string& s) { return s.empty() ? nullptr : s.c_str(); };
    if (mysql_real_connect(conn.get(), text(address.host), address.user.c_str(), text(address.password),
                           text(address.database), static_cast<unsigned>(address.port), socket, 0) == nullptr) {
        error = mysql_error(conn.get());
        return {nullptr, &mysql_close};
    }
    return conn;
}

connection_ptr connect(const mariadb_address& address) {
    std::string error;
    auto conn = try_connect(address, 30, error);
    if (!conn) throw std::runtime_error("cannot connect to " + address.url() + ": " + error);
    return conn;
}

void execute(MYSQL* conn, const std::string& sql) {
    if (mysql_real_query(conn, sql.data(), sql.size()) != 0)
        throw std::runtime_error(sql + ": " + mysql_error(conn) + " [" + std::to_string(mysql_errno(conn)) + "]");
}

// The first column of each row `sql` returns.
std::vector<std::string> first_column(MYSQL* conn, const std::string& sql) {
    execute(conn, sql);
    const std::unique_ptr<MYSQL_RES, decltype(&mysql_free_result)> result(mysql_store_result(conn), &mysql_free_result);
    if (!result) throw std::runtime_error(sql + ": " + mysql_error(conn));
    std::vector<std::string> values;
    while (MYSQL_ROW row = mysql_fetch_row(result.get())) values.emplace_back(row[0] != nullptr ? row[0] : "");
    return values;
}

std::string quoted_name(std::string_view name) {
    std::string out = "`";
    for (char c : name) out += c == '`' ? std::string("``") : std::string(1, c);
    return out + "`";
}

std::string quoted_text(MYSQL* conn, std::string_view text) {
    std::string out(text.size() * 2 + 1, '\0');
    out.resize(mysql_real_escape_string(conn, out.data(), text.data(), text.size()));
    return "'" + out + "'";
}

}  // namespace

// ---------------------------------------------------------------------------

mariadb_address mariadb_address::parse(std::string_view url) {
    mariadb_address a;
    std::string_view rest = url;
    if (rest.starts_with("mariadb://")) {
        rest.remove_prefix(10);
    } else if (rest.starts_with("mysql://")) {
        rest.remove_prefix(8);
    } else {
        throw std::invalid_argument("not a mariadb:// or mysql:// URL: " + std::string(url));
    }
    const auto authority_end = rest.find_first_of("/?");
    std::string_view authority = rest.substr(0, authority_end);
    rest = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);

    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        const std::string_view userinfo = authority.substr(0, at);
        const auto colon = userinfo.find(':');
        a.user = percent_decode(userinfo.substr(0, colon));
        a.password = colon == std::string_view::npos ? std::string() : percent_decode(userinfo.substr(colon + 1));
        authority.remove_prefix(at + 1);
    }
    std::string_view port;
    if (authority.starts_with('[')) {  // [IPv6]
        const auto close = authority.find(']');
        if (close == std::string_view::npos)
            throw std::invalid_argument("mariadb URL: an unclosed '[': " + std::string(url));
        a.host = std::string(authority.substr(1, close - 1));
        if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
    } else {
        const auto colon = authority.find(':');
        a.host = percent_decode(authority.substr(0, colon));
        if (colon != std::string_view::npos) port = authority.substr(colon + 1);
    }
    if (!port.empty()) {
        const bool digits = port.size() <= 5 && port.find_first_not_of("0123456789") == std::string_view::npos;
        a.port = digits ? std::stoi(std::string(port)) : 0;
        if (a.port <= 0 || a.port > 65535) throw std::invalid_argument("mariadb URL: a bad port: " + std::string(url));
    }

    const auto query_at = rest.find('?');
    const std::string_view path = rest.substr(0, query_at);
    if (!path.empty()) a.database = percent_decode(path.substr(1));
    if (query_at != std::string_view::npos) {
        std::string_view query = rest.substr(query_at + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const std::string_view pair = query.substr(0, amp);
            query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
            if (pair.empty()) continue;
            const auto eq = pair.find('=');
            if (eq == std::string_view::npos)
                throw std::invalid_argument("mariadb URL: a query setting without '=': " + std::string(url));
            a.options.emplace_back(percent_decode(pair.substr(0, eq)), percent_decode(pair.substr(eq + 1)));
        }
    }
    return a;
}

std::string mariadb_address::url() const {
    std::string out = "mariadb://" + percent_encode(user);
    if (!password.empty()) out += ":" + percent_encode(password);
    out += "@";
    out += host.find(':') != std::string::npos ? "[" + host + "]" : percent_encode(host);
    if (!host.empty()) out += ":" + std::to_string(port);
    out += "/" + percent_encode(database);
    char separator = '?';
    for (const auto& [key, value] : options) {
        out += separator + percent_encode(key) + "=" + percent_encode(value, "/:");
        separator = '&';
    }
    return out;
}

std::string mariadb_address::soci() const {
    std::string out;
    const auto add = [&](std::string_view key, std::string_view value) {
        if (!out.empty()) out += ' ';
        out += std::string(key) + "=" + soci_value(value);
    };
    // Without a host libmariadb goes to the unix socket (unix_socket, else its compiled-in default).
    if (!host.empty()) {
        add("host", host);
        add("port", std::to_string(port));
    }
    add("user", user);
    if (!password.empty()) add("password", password);
    if (!database.empty()) add("db", database);
    for (const auto& [key, value] : options) add(key, value);
    return out;
}

mariadb_address mariadb_address::with_database(std::string_view name) const {
    mariadb_address copy = *this;
    copy.database = std::string(name);
    return copy;
}

mariadb_address mariadb_address::with_port(int other) const {
    mariadb_address copy = *this;
    copy.port = other;
    return copy;
}

// ---------------------------------------------------------------------------

void install_mariadb(const std::filesystem::path& dir) {
    // root@localhost, root@127.0.0.1 and root@::1 without a password (normal, not
    // the unix-socket authentication Debian defaults to, which would tie root to
    // the system user root). --skip-name-resolve: no DNS lookup of this host's
    // name, which can hang where there is no resolver. The server's own options
    // (native AIO off) go through to the bootstrap mariadbd it runs.
    // Its own --tmpdir: the bootstrap server's temporary tables have the same names in every
    // instance, so installs running at once (tests in parallel) would delete each other's in /tmp.
    run_as_server_user({IDEM_MARIADB_INSTALL_DB, "--no-defaults", "--datadir=" + (dir / "data").string(),
                        "--tmpdir=" + dir.string(), "--auth-root-authentication-method=normal", "--skip-test-db",
                        "--skip-name-resolve", "--innodb-use-native-aio=0"},
                       dir, "install-db.log");
}

std::vector<std::string> mariadbd_command(const std::filesystem::path& dir, int port,
                                          const mariadb_settings& settings) {
    const std::string folder = dir.string();
    std::vector<std::string> argv{
        IDEM_MARIADBD,
        "--no-defaults",  // first, or mariadbd reads /etc/mysql/my.cnf anyway
        "--datadir=" + folder + "/data",
        "--port=" + std::to_string(port),
        "--bind-address=127.0.0.1",
        "--socket=" + (dir / "mariadb.sock").string(),
        "--pid-file=" + folder + "/mariadbd.pid",
        "--tmpdir=" + folder,
        // Connections from 127.0.0.1 match root@127.0.0.1 without a reverse lookup.
        "--skip-name-resolve",
        // Tests need no durability against a machine crash, only against a killed server.
        "--skip-log-bin",
        "--innodb-doublewrite=0",
        "--innodb-flush-log-at-trx-commit=" + std::to_string(settings.flush_log_at_trx_commit),
        "--innodb-buffer-pool-size=32M",
        // InnoDB's own I/O threads rather than io_uring or libaio: io_uring may be
        // refused (a container's seccomp filter, RLIMIT_MEMLOCK) and libaio's
        // contexts are counted machine-wide (fs.aio-max-nr) across every server
        // the parallel tests start, so the server starts alike everywhere.
        "--innodb-use-native-aio=0",
        "--max-connections=400",
        // Tests that cut connections mid-handshake (a paused server, a proxy) must
        // not get 127.0.0.1 blocked after the default 100 such errors.
        "--max-connect-errors=1000000",
    };
    argv.insert(argv.end(), settings.extra_args.begin(), settings.extra_args.end());
    return argv;
}

bool mariadb_answers(const mariadb_address& address) {
    std::string ignored;
    return try_connect(address, 1, ignored) != nullptr;
}

std::vector<std::vector<std::string>> mariadb_rows(const mariadb_address& address, const std::string& sql) {
    const auto conn = connect(address);
    execute(conn.get(), sql);
    std::vector<std::vector<std::string>> rows;
    const std::unique_ptr<MYSQL_RES, decltype(&mysql_free_result)> result(mysql_store_result(conn.get()),
                                                                          &mysql_free_result);
    if (!result) return rows;  // a statement without rows
    const unsigned columns = mysql_num_fields(result.get());
    while (MYSQL_ROW row = mysql_fetch_row(result.get())) {
        std::vector<std::string>& out = rows.emplace_back();
        for (unsigned i = 0; i < columns; ++i) out.emplace_back(row[i] != nullptr ? row[i] : "");
    }
    return rows;
}

mariadb_server::mariadb_server(mariadb_settings settings)
    : settings_(std::move(settings)), port_(free_loopback_port()), server_("mariadb") {
    install_mariadb(server_.dir());
    start();
    execute(connect(address("")).get(), "CREATE DATABASE " + quoted_name(default_database));
}

mariadb_address mariadb_server::address(std::string_view database) const {
    mariadb_address a;
    a.port = port_;
    a.database = std::string(database);
    return a;
}

std::string mariadb_server::connection(std::string_view database) const {
    return address(database).url();
}

std::string mariadb_server::soci_connection(std::string_view database) const {
    return address(database).soci();
}

std::string mariadb_server::soci_socket_connection(std::string_view database) const {
    mariadb_address a = address(database);
    a.host.clear();
    a.options.emplace_back("unix_socket", unix_socket().string());
    return a.soci();
}

void mariadb_server::start() {
    server_.start(
        mariadbd_command(server_.dir(), port_, settings_), [a = address("")] { return mariadb_answers(a); }, 30s);
}

void mariadb_server::stop() {
    server_.stop(SIGTERM, 10s);
}

// ---------------------------------------------------------------------------

mariadb_scratch_database::mariadb_scratch_database(std::string_view server, std::string_view label)
    : address_(mariadb_address::parse(server)) {
    static int serial = 0;
    name_ = "idem_" + std::string(label) + "_" + std::to_string(getpid()) + "_" + std::to_string(++serial);
    address_.database.clear();
    execute(connect(address_).get(), "CREATE DATABASE " + quoted_name(name_));
    address_.database = name_;
}

mariadb_scratch_database::~mariadb_scratch_database() {
    try {
        mariadb_address server = address_;
        server.database.clear();
        const auto conn = connect(server);
        // DROP DATABASE waits for every transaction that used a table of it, by
        // default for a day (lock_wait_timeout): end the connections still on it
        // (PostgreSQL's WITH (FORCE)) and wait at most 10 s for the rest.
        execute(conn.get(), "SET SESSION lock_wait_timeout = 10");
        for (const auto& id :
             first_column(conn.get(), "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = " +
                                          quoted_text(conn.get(), name_) + " AND ID <> CONNECTION_ID()")) {
            try {
                execute(conn.get(), "KILL CONNECTION " + id);
            } catch (const std::exception&) {
                // gone meanwhile, or another user's that this one may not end
            }
        }
        execute(conn.get(), "DROP DATABASE IF EXISTS " + quoted_name(name_));
    } catch (...) {
        // a destructor has no one to report to
    }
}

std::optional<std::string> external_mariadb() {
    const char* value = std::getenv("IDEM_TEST_MARIADB");
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

std::string shared_mariadb() {
    if (auto external = external_mariadb()) {
        static mariadb_scratch_database database(*external, "test");
        return database.connection();
    }
    static mariadb_server server;
    return server.connection();
}

}  // namespace idem::test
