#include "sql/soci_errors.hpp"

#include <soci/error.h>

#include <string>

#include "idem/error.hpp"
#include "sql/sql_dialect.hpp"

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

void rethrow_soci_as_store_error(std::string_view what, soci::session* session) {
    translate_driver_error(what, session);
    try {
        throw;
    } catch (const soci::soci_error& e) {
        // e.what() carries SOCI's context (the query and its bound values): never use it.
        const auto t = translate(e.get_error_category());
        throw store_error(t.failure, "idem: " + std::string(what) + " failed: " + t.text);
    }
}

}  // namespace idem::detail
