#include "sql/sql_dialect.hpp"

#include <soci/session.h>

#include <array>
#include <atomic>
#include <exception>
#include <stdexcept>

#include "sql/sql_connection.hpp"

namespace idem::detail {
namespace {

// Written as libraries load, read by every runner and every failure after:
// a fixed table of atomics needs no lock and no allocation on either side.
std::array<std::atomic<const sql_dialect*>, 8> registered{};

}  // namespace

std::unique_ptr<sql_connection> sql_dialect::connect(soci::session& session, std::string begin_sql) const {
    return make_soci_connection(session, std::move(begin_sql));
}

void sql_dialect::translate_error(std::string_view, soci::session*) const {}

void register_dialect(const sql_dialect& dialect) noexcept {
    for (auto& slot : registered) {
        const sql_dialect* current = nullptr;
        if (slot.compare_exchange_strong(current, &dialect)) return;  // a free slot
        if (current->soci_backend() == dialect.soci_backend()) {      // a replacement
            slot.store(&dialect);
            return;
        }
    }
    std::terminate();  // more dialects than slots: a build error in all but name
}

const sql_dialect& dialect_of(soci::session& session) {
    if (session.get_backend() == nullptr) throw std::invalid_argument("idem: the SOCI session is not connected");
    const std::string backend = session.get_backend_name();
    for (const auto& slot : registered)
        if (const sql_dialect* dialect = slot.load(); dialect != nullptr && dialect->soci_backend() == backend)
            return *dialect;
    throw std::invalid_argument("idem: no idem dialect is loaded for SOCI backend '" + backend +
                                "' (link the idem store library of that database)");
}

void translate_driver_error(std::string_view what, soci::session* session) {
    for (const auto& slot : registered)
        if (const sql_dialect* dialect = slot.load()) dialect->translate_error(what, session);
}

}  // namespace idem::detail
