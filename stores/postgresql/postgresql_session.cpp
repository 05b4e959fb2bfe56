// Opening PostgreSQL sessions: the store's own and the application's.
#include <soci/postgresql/soci-postgresql.h>
#include <soci/session.h>

#include <stdexcept>
#include <string>

#include "idem/error.hpp"
#include "idem/postgresql_store.hpp"

namespace idem {
namespace {

// Rejects what libpq cannot parse before anything reaches the network.
void require_well_formed(const std::string& connection) {
    if (connection.empty()) throw std::invalid_argument("idem: the PostgreSQL connection string is empty");
    char* problem = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(connection.c_str(), &problem);
    if (problem != nullptr) PQfreemem(problem);  // may quote the string, password included: not repeated
    if (parsed == nullptr)
        throw std::invalid_argument(
            "idem: the PostgreSQL connection string is malformed (expected key=value pairs or a postgresql:// URI)");
    PQconninfoFree(parsed);
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
    require_well_formed(connection);
    try {
        session.open(soci::postgresql, connection);
    } catch (const soci::soci_error& e) {
        // SOCI reports a failed connect without a SQLSTATE. A server that answers
        // a ping refused this login or database (retrying will not help); one that
        // does not is unreachable (transient).
        const bool reachable = PQping(connection.c_str()) == PQPING_OK;
        const std::string why = first_line(e.get_error_message());
        if (reachable)
            throw store_error(store_failure::other, "idem: the PostgreSQL server refused the connection: " + why);
        throw store_error(store_failure::connection_lost, "idem: connecting to PostgreSQL failed: " + why, "08001");
    }
}

}  // namespace idem
