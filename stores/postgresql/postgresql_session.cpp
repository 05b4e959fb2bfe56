// Opening PostgreSQL sessions: the store's own and the application's.
#include <soci/postgresql/soci-postgresql.h>
#include <soci/session.h>

#include <cctype>
#include <stdexcept>
#include <string>

#include "idem/error.hpp"
#include "idem/postgresql_store.hpp"
#include "postgresql_native.hpp"

namespace idem {
namespace {

// Runners know PostgreSQL, through libpq, and the store registry opens its URLs, as soon
// as this library is loaded (a static link keeps this file with open_postgresql_session,
// which every use of the store calls).
const bool installed = (detail::pg::install_dialect(), detail::pg::register_store(), true);

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
    std::string uri = "postgresql://?fallback_application_name=idem";
    for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
        if (o->val == nullptr || std::string_view(o->keyword) == "fallback_application_name") continue;
        // libpq checks port numbers only once it connects, and then reports them like an unreachable server.
        if (std::string_view(o->keyword) == "port" &&
            std::string_view(o->val).find_first_not_of("0123456789,") != std::string_view::npos) {
            PQconninfoFree(parsed);
            throw std::invalid_argument("idem: the PostgreSQL port is not a number");
        }
        uri += '&';
        uri += o->keyword;
        uri += '=';
        for (const char c : std::string_view(o->val)) {
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
    PQconninfoFree(parsed);
    return uri;
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
                throw store_error(store_failure::other, "idem: the PostgreSQL server refused the connection: " + why);
            default:
                throw store_error(store_failure::connection_lost, "idem: connecting to PostgreSQL failed: " + why,
                                  "08001");
        }
    }
}

}  // namespace idem
