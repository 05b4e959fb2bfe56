#include "sql/migrations.hpp"

#include <soci/soci.h>

#include <set>

#include "idem/error.hpp"
#include "sql/soci_errors.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/sql_transaction.hpp"
#include "sql/unnamed_statement.hpp"

namespace idem::detail {
namespace {

constexpr const char* create_versions =
    "CREATE TABLE IF NOT EXISTS idem_schema_versions ("
    " version INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)";

std::set<int> applied_versions(soci::session& session) {
    std::set<int> versions;
    int version = 0;
    soci::statement rows = unnamed_statement(session, "SELECT version FROM idem_schema_versions", soci::into(version));
    rows.execute();
    while (rows.fetch()) versions.insert(version);
    return versions;
}

}  // namespace

std::vector<std::string> apply_migrations(transaction_runner& runner, std::span<const embedded_migration> migrations,
                                          const script_executor& execute_script) {
    return runner.run([&](unit_of_work& tx) {
        soci::session& session = tx.sql();
        std::set<int> applied;
        try {
            if (const std::string_view lock = tx.internals().dialect().migration_lock(); !lock.empty())
                session << std::string(lock);
            session << create_versions;
            applied = applied_versions(session);
        } catch (...) {
            rethrow_soci_as_store_error("reading the schema version", &session);
        }

        const int known = migrations.empty() ? 0 : migrations.back().version;
        if (!applied.empty() && *applied.rbegin() > known)
            throw store_error(store_failure::schema,
                              "idem: the database schema (version " + std::to_string(*applied.rbegin()) +
                                  ") is newer than this library (version " + std::to_string(known) + ")");

        std::vector<std::string> done;
        for (const auto& m : migrations) {
            if (applied.contains(m.version)) continue;
            execute_script(tx, m.sql);
            try {
                const std::string name(m.name);
                session << "INSERT INTO idem_schema_versions (version, name) VALUES (:version, :name)",
                    soci::use(m.version), soci::use(name);
            } catch (...) {
                rethrow_soci_as_store_error("recording migration " + std::string(m.name), &session);
            }
            done.emplace_back(m.name);
        }
        return done;
    });
}

}  // namespace idem::detail
