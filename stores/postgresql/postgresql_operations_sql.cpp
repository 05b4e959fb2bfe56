// The statements of operations in steps in PostgreSQL's SQL (see
// sql/operations_statements.hpp for what each does, binds and returns). Its
// clock is clock_timestamp(), not now(): a long transaction's steps see the
// time move on. Under READ COMMITTED a row read FOR UPDATE cannot change
// before COMMIT: a concurrent writer waits, then sees what this one wrote.
#include <string>

#include "postgresql_statements.hpp"

namespace idem::detail::pg {

const operations_statements& operations_sql() noexcept {
    // Built on first use: the dialect may be asked before this file's statics are.
    static const operations_statements statements = [] {
        // The database's clock: milliseconds since the epoch.
        const std::string now = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";
        const std::string operation_columns =
            "record_id, namespace, state, fence, recovery_point, compensate_from, completions, failures, "
            "expires_at, updated_at, " +
            now + ", input, result, last_error";
        return operations_statements{
            .exists = "SELECT COUNT(*) FROM idem_schema_versions WHERE name LIKE '%\\_completer' ESCAPE '\\'",
            .read_operation = "SELECT " + operation_columns + " FROM idem_operations WHERE record_id = :id",
            .read_steps =
                "SELECT step_index, name, kind, state, attempts, result, updated_at FROM idem_steps "
                "WHERE record_id = :id ORDER BY step_index",
            // Through the (state, expires_at) index, as the completer finds them.
            .unfinished = "SELECT " + operation_columns +
                          " FROM idem_operations WHERE state = 0 AND (:ns = '' OR namespace = :ns2) "
                          "ORDER BY expires_at LIMIT :n",
            .count_unfinished = "SELECT COUNT(*), SUM(CASE WHEN expires_at <= " + now +
                                " THEN 1 ELSE 0 END), MIN(expires_at), " + now +
                                " FROM idem_operations WHERE state = 0",
            .due = "SELECT record_id, namespace, failures FROM idem_operations WHERE state = 0 AND expires_at <= " +
                   now + " AND namespace IN ({namespaces}) ORDER BY expires_at LIMIT :n",
            .retention_cutoff = "SELECT " + now + " - :older",
            .expired =
                "SELECT record_id FROM idem_operations WHERE state = 1 AND expires_at <= :before "
                "ORDER BY expires_at LIMIT :n FOR UPDATE SKIP LOCKED",
            .delete_steps = "DELETE FROM idem_steps WHERE record_id = :id",
            .delete_operation = "DELETE FROM idem_operations WHERE record_id = :id",
            .count_expired =
                "SELECT COUNT(*) FROM idem_operations WHERE state = 1 AND expires_at <= " + now + " - :older",
            .put_off_fenced = "UPDATE idem_operations SET expires_at = " + now +
                              " + :wait, last_error = :e, failures = failures + :added, updated_at = " + now +
                              " WHERE record_id = :id AND state = 0 AND fence = :fence",
            .put_off_expired = "UPDATE idem_operations SET expires_at = " + now +
                               " + :wait, last_error = :e, failures = failures + :added, updated_at = " + now +
                               " WHERE record_id = :id AND state = 0 AND expires_at <= " + now,
            .lock_unfinished =
                "SELECT fence, compensates FROM idem_operations WHERE record_id = :id AND state = 0 FOR UPDATE",
            .release = "UPDATE idem_operations SET fence = fence + 1, expires_at = " + now + ", updated_at = " + now +
                       " WHERE record_id = :id AND state = 0",
            .release_compensating = "UPDATE idem_operations SET fence = fence + 1, expires_at = " + now +
                                    ", updated_at = " + now +
                                    ", compensate_from = COALESCE(compensate_from, (SELECT COALESCE(MAX(step_index) "
                                    "+ 1, 0) FROM idem_steps WHERE record_id = :id2)) "
                                    "WHERE record_id = :id AND state = 0",
            .hold = "SELECT fence, state FROM idem_operations WHERE record_id = :id FOR UPDATE",
            .advance = "UPDATE idem_operations SET recovery_point = :point, expires_at = " + now +
                       " + :lease, updated_at = " + now + " WHERE record_id = :id AND fence = :fence AND state = 0",
            .read_step = "SELECT name, kind, state, result FROM idem_steps WHERE record_id = :id AND step_index = :i",
            .insert_step =
                "INSERT INTO idem_steps (record_id, step_index, name, kind, state, result, attempts, "
                "updated_at) VALUES (:id, :i, :name, :kind, :state, :result, :attempts, " +
                now + ")",
            .call_again = "UPDATE idem_steps SET attempts = attempts + 1, updated_at = " + now +
                          " WHERE record_id = :id AND step_index = :i",
            .answer_call = "UPDATE idem_steps SET state = 1, result = :result, updated_at = " + now +
                           " WHERE record_id = :id AND step_index = :i AND state = 0",
            .stored_by_name =
                "SELECT result, step_index FROM idem_steps WHERE record_id = :id AND name = :name "
                "AND state = 1 AND (:before < 0 OR step_index < :before2)",
            .count_stored = "SELECT COUNT(*) FROM idem_steps WHERE record_id = :id AND state = 1",
            .delete_fenced = "DELETE FROM idem_operations WHERE record_id = :id AND fence = :fence",
            .finish =
                "UPDATE idem_operations SET state = 1, result = :result, recovery_point = :point, "
                "expires_at = " +
                now + " + :retention, updated_at = " + now + " WHERE record_id = :id AND fence = :fence AND state = 0",
            .abandon = "UPDATE idem_operations SET expires_at = " + now + ", updated_at = " + now +
                       " WHERE record_id = :id AND fence = :fence AND state = 0",
            .read_locked = "SELECT namespace, fingerprint, fence, recovery_point, state, result, expires_at, " + now +
                           ", input, compensate_from, completions, failures FROM idem_operations "
                           "WHERE record_id = :id FOR UPDATE",
            .take =
                "UPDATE idem_operations SET fence = :fence, completions = :completions, compensate_from = :from, "
                "expires_at = " +
                now + " + :lease, updated_at = " + now + " WHERE record_id = :id",
            .begin =
                "INSERT INTO idem_operations (record_id, namespace, fingerprint, fence, recovery_point, state, "
                "expires_at, updated_at, input, compensates) VALUES (:id, :ns, :fp, 1, 0, 0, " +
                now + " + :lease, " + now + ", :input, :compensates) ON CONFLICT (record_id) DO NOTHING RETURNING 1",
            .renew =
                "UPDATE idem_operations SET fingerprint = :fp, state = 0, result = NULL, recovery_point = 0, "
                "input = :input, failures = 0, last_error = NULL, compensates = :compensates "
                "WHERE record_id = :id",
            .next_step_index = "SELECT COALESCE(MAX(step_index) + 1, 0) FROM idem_steps WHERE record_id = :id",
            .count_stored_before =
                "SELECT COUNT(*) FROM idem_steps WHERE record_id = :id AND state = 1 "
                "AND step_index < :from",
        };
    }();
    return statements;
}

}  // namespace idem::detail::pg
