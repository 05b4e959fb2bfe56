// Opening PostgreSQL sessions: the store's own and the application's.
#include <soci/postgresql/soci-postgresql.h>
#include <soci/session.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "idem/error.hpp"
#include "idem/postgresql_store.hpp"
#include "postgresql_native.hpp"

namespace idem {
namespace {

// Runners know PostgreSQL, through libpq, and the store registry opens its URLs, as soon
// as this library is loaded (a static link keeps this file with open_postgresql_session,
// which every use of the store calls).
const bool installed = (detail::pg::install_dialect(), detail::pg::register_store(), true);

// A dead peer is found in seconds, not after the kernel's 15 minutes of
// retransmissions: keepalive probes from 5 s of silence, every 2 s, 3 unanswered
// end the connection (11 s); data unacknowledged for 10 s ends it too
// (tcp_user_timeout); a server that does not answer the connect, after 10 s.
// Each is a libpq keyword: one the connection string names is left as it is.
constexpr std::pair<std::string_view, std::string_view> dead_peer_defaults[] = {
    {"keepalives", "1"},       {"keepalives_idle", "5"},      {"keepalives_interval", "2"},
    {"keepalives_count", "3"}, {"tcp_user_timeout", "10000"}, {"connect_timeout", "10"},
};

// A record read from a standby can miss a key the primary has, and the work
// would run twice: idem's connections go to the server that takes writes.
void refuse_standby_target(std::string_view target) {
    if (target.empty() || target == "any" || target == "read-write" || target == "primary") return;
    throw std::invalid_argument("idem: target_session_attrs=" + std::string(target) +
                                " would send idem to a standby, whose records may lag the primary's: use read-write "
                                "(or primary), with every server of the cluster in host=");
}

void append_encoded(std::string& uri, std::string_view keyword, std::string_view value) {
    uri += '&';
    uri += keyword;
    uri += '=';
    for (const char c : value) {
        const auto byte = static_cast<unsigned char>(c);
        if (std::isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~') {
            uri += c;
        } else {
            constexpr char digits[] = "0123456789ABCDEF";
            uri += '%';
            uri += digits[byte >> 4];
            uri += digits[byte & 0x0F];
        }
    }
}

// The connection string in the one form SOCI 4.0 passes to libpq unchanged.
// SOCI splits the string at spaces into key=value tokens and joins them back
// without quotes, so a URI without '=' gains one and a quoted value with a
// space falls apart. A URI carrying every setting as a percent-encoded query
// parameter has neither spaces nor quotes. Malformed: std::invalid_argument,
// without libpq's message, which may quote the string (password included).
std::string soci_safe(const std::string& connection) {
    if (connection.empty()) throw std::invalid_argument("idem: the PostgreSQL connection string is empty");
    char* problem = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(connection.c_str(), &problem);
    if (problem != nullptr) PQfreemem(problem);
    if (parsed == nullptr)
        throw std::invalid_argument(
            "idem: the PostgreSQL connection string is malformed (expected key=value pairs or a postgresql:// URI)");
    const std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> owner(parsed, PQconninfoFree);
    std::string uri = "postgresql://?fallback_application_name=idem";
    std::set<std::string_view> named;
    for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
        if (o->val == nullptr || std::string_view(o->keyword) == "fallback_application_name") continue;
        const std::string_view keyword = o->keyword;
        // libpq checks port numbers only once it connects, and then reports them like an unreachable server.
        if (keyword == "port" && std::string_view(o->val).find_first_not_of("0123456789,") != std::string_view::npos)
            throw std::invalid_argument("idem: the PostgreSQL port is not a number");
        if (keyword == "target_session_attrs") refuse_standby_target(o->val);
        named.insert(keyword);
        append_encoded(uri, keyword, o->val);
    }
    if (!named.contains("target_session_attrs")) {
        const char* from_environment = std::getenv("PGTARGETSESSIONATTRS");
        refuse_standby_target(from_environment != nullptr ? from_environment : "");
    }
    for (const auto& [keyword, value] : dead_peer_defaults)
        if (!named.contains(keyword)) append_encoded(uri, keyword, value);
    return uri;
}

// libpq refused every server because none takes writes (target_session_attrs=read-write
// while a standby is promoted): a passing state of the cluster, unlike a refused login.
bool no_server_takes_writes(std::string_view message) {
    for (const std::string_view why : {"session is read-only", "server is in hot standby mode"})
        if (message.find(why) != std::string_view::npos) return true;
    return false;
}

// libpq's first line about the failure ("connection to server at ... failed:
// Connection refused"); it names the server and the user, never a password.
std::string first_line(std::string_view message) {
    constexpr std::string_view soci_prefix = "Cannot establish connection to the database.\n";
    if (message.starts_with(soci_prefix)) message.remove_prefix(soci_prefix.size());
    return std::string(message.substr(0, message.find('\n')));
}

}  // namespace

void open_postgresql_session(soci::session& session, const std::string& connection) {
    const std::string uri = soci_safe(connection);
    try {
        session.open(soci::postgresql, uri);
    } catch (const soci::soci_error& e) {
        // SOCI reports a failed connect without a SQLSTATE. libpq tells settings
        // it cannot use (a port that is not a number) from a server that answers
        // a ping but refused this login or database (retrying will not help) and
        // from one that cannot be reached (transient).
        const std::string why = first_line(e.get_error_message());
        switch (PQping(uri.c_str())) {
            case PQPING_NO_ATTEMPT:
                throw std::invalid_argument("idem: the PostgreSQL connection settings are invalid: " + why);
            case PQPING_OK:
                if (no_server_takes_writes(e.get_error_message()))
                    throw store_error(store_failure::connection_lost,
                                      "idem: no PostgreSQL server named takes writes now: " + why, "25006");
                throw store_error(store_failure::other, "idem: the PostgreSQL server refused the connection: " + why);
            default:
                throw store_error(store_failure::connection_lost, "idem: connecting to PostgreSQL failed: " + why,
                                  "08001");
        }
    }
}

}  // namespace idem
