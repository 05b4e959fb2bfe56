#include "sql/soci_errors.hpp"

#include <soci/error.h>

#include <string>

#include "idem/error.hpp"

#ifdef IDEM_SQL_HAVE_SQLITE
#include "sql/sqlite_native.hpp"
#endif

#ifdef IDEM_SQL_HAVE_POSTGRESQL
#include <soci/postgresql/soci-postgresql.h>
#include <soci/session.h>

#include "sql/postgresql_native.hpp"
#endif

namespace idem::detail {
namespace {

struct translation {
    store_failure failure;
    const char* text;
};

translation translate(soci::soci_error::error_category category) {
    switch (category) {
        case soci::soci_error::connection_error: return {store_failure::connection_lost, "connection error"};
        case soci::soci_error::unknown_transaction_state:
            return {store_failure::connection_lost, "transaction state unknown"};
        case soci::soci_error::invalid_statement: return {store_failure::schema, "invalid statement"};
        case soci::soci_error::no_privilege: return {store_failure::other, "no privilege"};
        case soci::soci_error::no_data: return {store_failure::other, "no data"};
        case soci::soci_error::constraint_violation: return {store_failure::constraint, "constraint violation"};
        case soci::soci_error::system_error: return {store_failure::other, "system error"};
        case soci::soci_error::unknown: break;
    }
    return {store_failure::other, "database error"};
}

}  // namespace

void rethrow_soci_as_store_error(std::string_view what, [[maybe_unused]] soci::session* session) {
    try {
        throw;
#ifdef IDEM_SQL_HAVE_POSTGRESQL
    } catch (const soci::postgresql_soci_error& e) {
        // SOCI keeps the SQLSTATE (blank when libpq had none, as for a dropped connection).
        std::string sqlstate = e.sqlstate();
        if (sqlstate.find_first_not_of(' ') == std::string::npos) sqlstate.clear();
        const PGconn* conn = nullptr;
        if (session != nullptr && session->get_backend() != nullptr) conn = pg::native_handle(*session);
        if (!sqlstate.empty() || conn != nullptr) throw pg::error(conn, sqlstate, what);
        const auto t = translate(e.get_error_category());
        throw store_error(t.failure, "idem: " + std::string(what) + " failed: " + t.text);
#endif
#ifdef IDEM_SQL_HAVE_SQLITE
    } catch (const soci::sqlite3_soci_error& e) {
        // The result code tells a busy database and a constraint apart; the message is SQLite's generic text.
        throw sqlite::error(e.result(), std::string(what) + " failed");
#endif
    } catch (const soci::soci_error& e) {
        // e.what() carries SOCI's context (the query and its bound values): never use it.
        const auto t = translate(e.get_error_category());
        throw store_error(t.failure, "idem: " + std::string(what) + " failed: " + t.text);
    }
}

}  // namespace idem::detail
