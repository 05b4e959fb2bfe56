// Control statements through SOCI itself: the runner's path for a dialect
// whose native connection is not loaded (see provide_native_connection).
#include <soci/session.h>

#include <array>
#include <atomic>
#include <stdexcept>

#include "sql/soci_errors.hpp"
#include "sql/sql_connection.hpp"

namespace idem::detail {
namespace {

class soci_connection final : public sql_connection {
public:
    soci_connection(soci::session& session, std::string begin_sql)
        : session_(session), begin_sql_(std::move(begin_sql)) {}

    void begin() override { execute(begin_sql_, begin_sql_); }
    void commit() override { execute("COMMIT", "COMMIT"); }
    void rollback() override { execute("ROLLBACK", "ROLLBACK"); }

    void execute(const std::string& sql, std::string_view what) override {
        try {
            session_ << sql;
        } catch (...) {
            rethrow_soci_as_store_error(what);
        }
    }

    [[nodiscard]] const std::string& begin_sql() const noexcept override { return begin_sql_; }

private:
    soci::session& session_;
    std::string begin_sql_;
};

}  // namespace

void sql_connection::finish(deferred_statement&, bool) {
    throw std::logic_error("idem: only PostgreSQL transactions defer statements");
}

sql_dialect dialect_of(soci::session& session) {
    if (session.get_backend() == nullptr)
        throw std::invalid_argument("idem: the SOCI session is not connected");
    const std::string backend = session.get_backend_name();
    if (backend == "sqlite3") return sql_dialect::sqlite;
    if (backend == "postgresql") return sql_dialect::postgresql;
    throw std::invalid_argument("idem: SOCI backend '" + backend + "' is not supported (sqlite3, postgresql)");
}

std::unique_ptr<sql_connection> make_soci_connection(soci::session& session, std::string begin_sql) {
    return std::make_unique<soci_connection>(session, std::move(begin_sql));
}

namespace {
// One per sql_dialect; set when a driver's library loads, read by every runner after.
std::array<std::atomic<native_connection_factory>, 2> native_connections{};
}  // namespace

void provide_native_connection(sql_dialect dialect, native_connection_factory factory) noexcept {
    native_connections.at(static_cast<std::size_t>(dialect)).store(factory);
}

native_connection_factory native_connection(sql_dialect dialect) noexcept {
    return native_connections.at(static_cast<std::size_t>(dialect)).load();
}

}  // namespace idem::detail
