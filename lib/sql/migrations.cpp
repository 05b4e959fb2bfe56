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

// The versions applied so far, after creating the table if it is missing;
// store_error(schema) when the database is newer than `migrations`.
std::set<int> applied_versions(soci::session& session, const schema_statements& s,
                               std::span<const embedded_migration> migrations) {
    std::set<int> versions;
    try {
        session << s.create_versions;
        int version = 0;
        soci::statement rows = unnamed_statement(session, s.applied_versions, soci::into(version));
        rows.execute();
        while (rows.fetch()) versions.insert(version);
    } catch (...) {
        rethrow_soci_as_store_error("reading the schema version", &session);
    }
    const int known = migrations.empty() ? 0 : migrations.back().version;
    if (!versions.empty() && *versions.rbegin() > known)
        throw store_error(store_failure::schema,
                          "idem: the database schema (version " + std::to_string(*versions.rbegin()) +
                              ") is newer than this library (version " + std::to_string(known) + ")");
    return versions;
}

void run_statement(soci::session& session, const std::string& text, const std::string& what) {
    try {
        session << text;
    } catch (...) {
        rethrow_soci_as_store_error(what, &session);
    }
}

void record(soci::session& session, const schema_statements& s, const embedded_migration& m) {
    try {
        const std::string name(m.name);
        session << s.record_version, soci::use(m.version, "version"), soci::use(name, "name");
    } catch (...) {
        rethrow_soci_as_store_error("recording migration " + std::string(m.name), &session);
    }
}

// Where DDL rolls back: every pending migration in one transaction, all or none.
std::vector<std::string> apply_in_one_transaction(transaction_runner& runner, const schema_statements& s,
                                                  std::span<const embedded_migration> migrations,
                                                  const script_executor& execute_script) {
    return runner.run([&](unit_of_work& tx) {
        soci::session& session = tx.sql();
        if (!s.lock.empty()) run_statement(session, s.lock, "waiting for other migrations");
        const std::set<int> applied = applied_versions(session, s, migrations);
        std::vector<std::string> done;
        for (const auto& m : migrations) {
            if (applied.contains(m.version)) continue;
            execute_script(tx, m.sql);
            record(session, s, m);
            done.emplace_back(m.name);
        }
        return done;
    });
}

// Where DDL commits as it runs: every migration a step of its own, under the
// connection's lock, read again and recorded as it ends. A step that failed
// half way runs again whole next time (its script is safe to rerun).
std::vector<std::string> apply_step_by_step(transaction_runner& runner, const schema_statements& s,
                                            std::span<const embedded_migration> migrations,
                                            const script_executor& execute_script) {
    if (!s.lock.empty())
        runner.run([&](unit_of_work& tx) { run_statement(tx.sql(), s.lock, "waiting for other migrations"); });
    std::vector<std::string> done;
    try {
        for (const auto& m : migrations) {
            const bool applied = runner.run([&](unit_of_work& tx) {
                soci::session& session = tx.sql();
                if (applied_versions(session, s, migrations).contains(m.version)) return true;
                execute_script(tx, m.sql);
                record(session, s, m);
                return false;
            });
            if (!applied) done.emplace_back(m.name);
        }
    } catch (...) {
        try {
            if (!s.unlock.empty()) runner.run([&](unit_of_work& tx) { tx.sql() << s.unlock; });
        } catch (...) {
            // The lock goes with the connection when it closes.
        }
        throw;
    }
    if (!s.unlock.empty())
        runner.run([&](unit_of_work& tx) { run_statement(tx.sql(), s.unlock, "ending the migration"); });
    return done;
}

}  // namespace

std::vector<std::string> apply_migrations(transaction_runner& runner, std::span<const embedded_migration> migrations,
                                          const script_executor& execute_script, const schema_statements* statements) {
    const schema_statements& s = statements != nullptr ? *statements : dialect_of(runner.session()).schema();
    return s.transactional_ddl ? apply_in_one_transaction(runner, s, migrations, execute_script)
                               : apply_step_by_step(runner, s, migrations, execute_script);
}

}  // namespace idem::detail
