// The PostgreSQL store in the store registry: the URLs it answers (a libpq
// URI, postgresql:// or postgres://, or libpq keywords) and what
// idem::database::open and the `idem` command get for them.
#include <soci/session.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "idem/postgresql_store.hpp"
#include "idem/store_registry.hpp"
#include "postgresql_native.hpp"

namespace idem::detail::pg {
namespace {

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
    return std::ranges::find(keywords, keyword) != keywords.end();
}

// The database must exist already: store_access changes nothing but read_only,
// which the store has no use for (its reads take no write lock).
opened_store open(const database_url& url, const store_request& request) {
    const postgresql_store_options options{.connection = url.location,
                                           .pool_size = request.pool_size,
                                           .migrate_on_open = false,
                                           .answer_timeout = request.answer_timeout,
                                           .transaction_pooler = request.transaction_pooler};
    auto store = std::make_shared<postgresql_store>(options);
    store_admin* admin = store.get();
    // A business transaction waits for a row lock no longer than the store's own
    // statements do (its record shares that transaction in once()). Behind a
    // transaction pooler a SET would stay on whichever server connection ran it.
    const long long lock_timeout_ms = options.transaction_pooler ? 0 : options.lock_timeout.count();
    return opened_store{std::move(store), admin, [connection = url.location, lock_timeout_ms](soci::session& s) {
                            open_postgresql_session(s, connection);
                            if (lock_timeout_ms > 0) s << "SET lock_timeout = " + std::to_string(lock_timeout_ms);
                        }};
}

}  // namespace

void register_store() {
    // The location is the text whole: libpq takes URIs and keywords alike.
    idem::register_store({.scheme = "postgresql",
                          .display_name = "PostgreSQL",
                          .prefixes = {"postgresql://", "postgres://"},
                          .recognises = opens_with_libpq_keyword,
                          .description = "postgresql://... or postgres://... or libpq keywords such as "
                                         "\"host=db dbname=bank\""},
                         open);
}

}  // namespace idem::detail::pg
