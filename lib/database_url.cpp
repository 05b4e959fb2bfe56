#include "idem/database_url.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace idem {
namespace {

[[noreturn]] void reject(std::string_view why) {
    throw std::invalid_argument("idem: the database " + std::string(why) + "; use " + std::string(database_url_forms));
}

bool is_scheme(std::string_view s) {
    return !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") ==
                             std::string_view::npos;
}

bool has_sqlite_extension(std::string_view path) {
    return path.ends_with(".db") || path.ends_with(".sqlite") || path.ends_with(".sqlite3");
}

// libpq's connection keywords: a string that opens with one of them is a
// keyword/value connection string, not a file name.
bool opens_with_libpq_keyword(std::string_view text) {
    static constexpr std::array<std::string_view, 24> keywords = {"host",
                                                                  "hostaddr",
                                                                  "port",
                                                                  "dbname",
                                                                  "user",
                                                                  "password",
                                                                  "passfile",
                                                                  "service",
                                                                  "connect_timeout",
                                                                  "client_encoding",
                                                                  "options",
                                                                  "application_name",
                                                                  "sslmode",
                                                                  "sslcert",
                                                                  "sslkey",
                                                                  "sslrootcert",
                                                                  "sslpassword",
                                                                  "target_session_attrs",
                                                                  "keepalives",
                                                                  "keepalives_idle",
                                                                  "gssencmode",
                                                                  "krbsrvname",
                                                                  "requiressl",
                                                                  "channel_binding"};
    const auto start = text.find_first_not_of(" \t");
    if (start == std::string_view::npos) return false;
    text.remove_prefix(start);
    const auto end = text.find_first_of(" \t=");
    if (end == std::string_view::npos) return false;
    const std::string_view keyword = text.substr(0, end);
    const auto equals = text.find_first_not_of(" \t", end);
    if (equals == std::string_view::npos || text[equals] != '=') return false;
    for (const std::string_view k : keywords)
        if (k == keyword) return true;
    return false;
}

}  // namespace

database_url database_url::parse(std::string_view text) {
    if (text.empty()) reject("name is empty");
    if (text.find('\0') != std::string_view::npos) reject("name contains a NUL byte");
    if (text.starts_with("postgresql://") || text.starts_with("postgres://"))
        return {backend::postgresql, std::string(text)};
    if (text.starts_with("sqlite:")) {
        std::string_view path = text.substr(7);
        // sqlite:///var/lib/app.db: an empty authority before an absolute path.
        if (path.starts_with("//")) {
            if (!path.starts_with("///")) reject("URL sqlite:// needs an absolute path (sqlite:///PATH)");
            path.remove_prefix(2);
        }
        if (path.empty()) reject("URL sqlite: needs a path");
        if (path == ":memory:") reject("cannot be :memory: (each pooled connection would open its own empty database)");
        return {backend::sqlite, std::string(path)};
    }
    if (const auto colon = text.find("://"); colon != std::string_view::npos && is_scheme(text.substr(0, colon)))
        reject("URL has an unknown scheme (" + std::string(text.substr(0, std::min<std::size_t>(colon, 20))) + ")");
    if (opens_with_libpq_keyword(text)) return {backend::postgresql, std::string(text)};
    if (has_sqlite_extension(text)) return {backend::sqlite, std::string(text)};
    // Never repeat the text: a connection string may carry a password.
    reject("name is none of the accepted forms");
}

}  // namespace idem
