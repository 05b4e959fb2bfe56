// Control statements through SOCI itself: the runner's path for a dialect
// without a connection of its own (see sql_dialect::connect).
#include <soci/session.h>

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

void sql_connection::finish(std::span<const std::unique_ptr<deferred_statement>>, bool) {
    throw std::logic_error("idem: this dialect's connection has no fast path: it cannot defer statements");
}

std::unique_ptr<sql_connection> make_soci_connection(soci::session& session, std::string begin_sql) {
    return std::make_unique<soci_connection>(session, std::move(begin_sql));
}

}  // namespace idem::detail
