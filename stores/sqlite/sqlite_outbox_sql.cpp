// The outbox's statements in SQLite's SQL (see sql/outbox_statements.hpp for
// what each does, binds and returns). The 64-bit columns are read through
// CAST: SOCI reads a column SQLite declares INTEGER as 32 bits into a vector
// (milliseconds since the epoch were cut short).
#include "sqlite_statements.hpp"

namespace idem::detail::sqlite {

const outbox_statements& outbox_sql() noexcept {
    // Built on first use: the dialect may be asked before this file's statics are.
    static const outbox_statements statements{
        .queue_settings = {},
        .insert =
            "INSERT INTO idem_outbox_intake (id, topic, ordering_key, headers, payload, created_at) "
            "VALUES (:id, :topic, :ordering_key, :headers, :payload, :created)",
        .insert_at_commit = {},
        .intake_lock = {},
        .take_in = {},
        .intake_range = "SELECT MAX(seq), COUNT(*) FROM (SELECT seq FROM idem_outbox_intake ORDER BY seq LIMIT :n)",
        .intake_copy =
            "INSERT INTO idem_outbox (id, topic, ordering_key, headers, payload, created_at, available_at) "
            "SELECT id, topic, ordering_key, headers, payload, created_at, created_at FROM idem_outbox_intake "
            "WHERE seq <= :last ORDER BY seq ON CONFLICT (id) DO NOTHING",
        .intake_remove = "DELETE FROM idem_outbox_intake WHERE seq <= :last",
        .take_free =
            "UPDATE idem_outbox SET attempts = attempts + 1, available_at = :until, claim = :token "
            "WHERE id IN (SELECT o.id FROM idem_outbox o WHERE o.state = 0 AND o.available_at <= :now "
            "AND (o.ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM idem_outbox e "
            "WHERE e.ordering_key = o.ordering_key AND e.seq < o.seq AND e.state <> 1)) "
            "ORDER BY o.available_at, o.seq LIMIT :n) "
            "RETURNING CAST(seq AS BIGINT), id, topic, ordering_key, headers, payload, attempts, "
            "CAST(created_at AS BIGINT)",
        .mark_taken = {},
        // A message waits when its key's first undelivered message is dead or
        // backing off, or 64 or more come before it; never one whose predecessor
        // is in flight.
        .set_aside =
            "UPDATE idem_outbox SET available_at = :until WHERE id IN (SELECT w.id FROM "
            "(SELECT o.id, o.seq, o.ordering_key FROM idem_outbox o WHERE o.state = 0 "
            "AND o.available_at <= :now ORDER BY o.available_at, o.seq LIMIT :window) w "
            "WHERE w.ordering_key IS NOT NULL AND ("
            "(SELECT CASE WHEN h.state = 2 OR (h.claim IS NULL AND h.available_at > :stalled_at) THEN 1 ELSE 0 "
            "END FROM idem_outbox h WHERE h.ordering_key = w.ordering_key AND h.state <> 1 "
            "ORDER BY h.seq LIMIT 1) = 1 "
            "OR (SELECT COUNT(*) FROM (SELECT 1 FROM idem_outbox d WHERE d.ordering_key = w.ordering_key "
            "AND d.seq < w.seq AND d.state <> 1 LIMIT 64) q) = 64) "
            "AND (SELECT CASE WHEN p.claim IS NULL OR p.available_at <= :in_flight_at THEN 1 ELSE 0 END "
            "FROM idem_outbox p WHERE p.ordering_key = w.ordering_key AND p.seq < w.seq AND p.state <> 1 "
            "ORDER BY p.seq DESC LIMIT 1) = 1)",
        .intake_rows =
            "SELECT CAST(seq AS BIGINT), id, topic, ordering_key, headers, payload, CAST(created_at AS BIGINT) "
            "FROM idem_outbox_intake ORDER BY seq LIMIT :n",
        .find_message = "SELECT topic, ordering_key, headers, payload FROM idem_outbox WHERE id = :id",
        .insert_message =
            "INSERT INTO idem_outbox (id, topic, ordering_key, headers, payload, created_at, available_at, "
            "state, done_at, last_answer) VALUES (:id, :topic, :ordering_key, :headers, :payload, :created, "
            ":available, :state, :done, :answer)",
        .remove_intake_row = "DELETE FROM idem_outbox_intake WHERE seq = :seq",
        .settle_one =
            "UPDATE idem_outbox SET state = :state, available_at = :due, last_answer = :answer, "
            "done_at = :done, claim = NULL WHERE id = :id AND state = 0 AND claim = :token",
        .settle_rest =
            "UPDATE idem_outbox SET state = 1, done_at = :at, claim = NULL, last_answer = NULL "
            "WHERE state = 0 AND available_at = :until AND claim = :token",
        .release_next =
            "UPDATE idem_outbox SET available_at = :due WHERE id IN (SELECT (SELECT CASE WHEN e.state = 0 "
            "AND e.claim IS NULL AND e.available_at > :set_aside THEN e.id END FROM idem_outbox e "
            "WHERE e.ordering_key = d.ordering_key AND e.seq > d.seq AND e.state <> 1 ORDER BY e.seq LIMIT 1) "
            "FROM idem_outbox d WHERE d.state = 1 AND d.done_at = :delivered AND d.ordering_key IS NOT NULL) "
            "AND claim IS NULL AND available_at > :later",
        .requeue_all =
            "UPDATE idem_outbox SET state = 0, attempts = 0, available_at = :at, done_at = NULL WHERE state = 2",
        .requeue_one =
            "UPDATE idem_outbox SET state = 0, attempts = 0, available_at = :at, done_at = NULL "
            "WHERE state = 2 AND id = :id",
        .count =
            "SELECT p.n, (SELECT COUNT(*) FROM idem_outbox WHERE state = 2), "
            "(SELECT created_at FROM idem_outbox WHERE state = 0 AND seq = p.oldest) "
            "FROM (SELECT COUNT(*) AS n, MIN(seq) AS oldest FROM idem_outbox WHERE state = 0) p",
        .count_intake =
            "SELECT COUNT(*), (SELECT created_at FROM idem_outbox_intake ORDER BY seq LIMIT 1) "
            "FROM idem_outbox_intake",
        .purge =
            "DELETE FROM idem_outbox WHERE id IN (SELECT id FROM idem_outbox WHERE state = 1 "
            "AND done_at <= :before ORDER BY done_at LIMIT :n)",
        .count_delivered = "SELECT COUNT(*) FROM idem_outbox WHERE state = 1 AND done_at <= :before",
        .exists = "SELECT COUNT(*) FROM idem_schema_versions WHERE name LIKE '%outbox'",
        .dead_letters =
            "SELECT id, topic, attempts, last_answer FROM idem_outbox WHERE state = 2 ORDER BY seq LIMIT :n",
    };
    return statements;
}

}  // namespace idem::detail::sqlite
