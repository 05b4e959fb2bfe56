#include "postgresql_pool.hpp"

namespace idem::detail::pg {
namespace {

// The store's statements run in their own short transactions, so they can
// insist on READ COMMITTED whatever the database's default; text comes back as UTF-8.
// Behind a transaction pooler a SET would stay on whichever server connection
// ran it: only client_encoding, which the pooler tracks per client, is set.
std::string session_settings(const postgresql_store_options& options) {
    if (options.transaction_pooler) return "SET client_encoding = 'UTF8'";
    std::string sql =
        "SET default_transaction_isolation = 'read committed'; SET client_encoding = 'UTF8';"
        " SET client_min_messages = warning";
    if (options.lock_timeout.count() > 0) sql += "; SET lock_timeout = " + std::to_string(options.lock_timeout.count());
    if (options.statement_timeout.count() > 0)
        sql += "; SET statement_timeout = " + std::to_string(options.statement_timeout.count());
    return sql;
}

bool reusable(PGconn* conn) noexcept {
    return !broken(conn) && !on_read_only_server(conn) && PQtransactionStatus(conn) == PQTRANS_IDLE &&
           PQpipelineStatus(conn) == PQ_PIPELINE_OFF;
}

}  // namespace

pooled_connection::pooled_connection(const postgresql_store_options& options) {
    open_postgresql_session(session, options.connection);
    PGconn* conn = native_handle(session);
    silence_notices(conn);
    (void)execute(conn, session_settings(options).c_str(), "configuring a connection");
    statements = std::make_shared<record_statements>(conn, !options.transaction_pooler);
}

std::unique_ptr<connection_pool> make_pool(const postgresql_store_options& options) {
    return std::make_unique<connection_pool>(
        options.pool_size, connection_pool::policy{
                               .open = [&options] { return std::make_unique<pooled_connection>(options); },
                               .usable = [](pooled_connection& c) { return still_usable(c.statements->conn()); },
                               .reusable = [](pooled_connection& c) { return reusable(c.statements->conn()); },
                           });
}

}  // namespace idem::detail::pg
