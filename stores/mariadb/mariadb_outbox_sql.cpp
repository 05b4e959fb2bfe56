// The outbox's statements in MariaDB's SQL (see sql/outbox_statements.hpp
// for what each does, binds and returns).
//
// MariaDB has no UPDATE ... RETURNING and no data-modifying WITH: a claim
// selects and locks its messages (take_free), then takes each (mark_taken),
// and the intake is taken in by three statements. Rows a statement changes
// are chosen in a derived table and joined to the table by id or seq
// (STRAIGHT_JOIN: the chosen rows first, each found through its index):
// "id IN (subquery)" in a DELETE reads, and locks, every row of the table.
// Each subquery names the index it reads (FORCE INDEX): a queue table's
// statistics are stale as soon as they are taken, and with them the
// optimizer may read a key's rows through the primary key, past every other
// row, to find the first in seq order.
//
// Rows a relay takes for itself are locked FOR UPDATE SKIP LOCKED, so
// concurrent relays pass over them. In an UPDATE or a DELETE, InnoDB reads
// even the rows of a subquery with a lock (shared), and would wait for a row
// another relay holds where PostgreSQL reads the last committed row: those
// reads pass over held rows too (LOCK IN SHARE MODE SKIP LOCKED), noted at
// each. A SELECT's subqueries read the last committed rows, without a lock,
// under READ COMMITTED, the level the store's sessions run at.
#include "mariadb_statements.hpp"

namespace idem::detail::mariadb {

const outbox_statements& outbox_sql() noexcept {
    // Built on first use: the dialect may be asked before this file's statics are.
    static const outbox_statements statements{
        // Nothing to set for a transaction: each statement names the index it
        // reads, and how a COMMIT is flushed is the server's setting
        // (innodb_flush_log_at_trx_commit), not the session's.
        .queue_settings = {},
        .insert =
            "INSERT INTO idem_outbox_intake (id, topic, ordering_key, headers, payload, created_at) "
            "VALUES (:id, :topic, :ordering_key, :headers, :payload, :created)",
        .insert_at_commit = {},
        // The one row of idem_outbox_lock (migrations/mariadb/0002_outbox.sql),
        // held until COMMIT: 1 when this transaction locked it, 0 when another holds it.
        .intake_lock = "SELECT COUNT(*) FROM (SELECT id FROM idem_outbox_lock WHERE id = 1 FOR UPDATE SKIP LOCKED) l",
        .take_in = {},
        // The intake's first rows, locked, passing over those of publishers
        // whose transactions are still open (PostgreSQL's statement does not
        // see them): they come in with a later claim, as on PostgreSQL.
        .intake_range =
            "SELECT MAX(seq), COUNT(*) FROM (SELECT seq FROM idem_outbox_intake FORCE INDEX (PRIMARY) "
            "ORDER BY seq LIMIT :n FOR UPDATE SKIP LOCKED) f",
        // Without a lock (READ COMMITTED): the rows the range locked, and any
        // that committed since (more come in than were counted, and the claim
        // looks at each). IGNORE turns away an id the outbox has, and counts
        // only the rows that came in; the rows come from a table of the same
        // columns, so no other error can be ignored. SOCI's connections count
        // found rows (CLIENT_FOUND_ROWS): ON DUPLICATE KEY UPDATE would count
        // a row turned away as one that came in.
        .intake_copy =
            "INSERT IGNORE INTO idem_outbox (id, topic, ordering_key, headers, payload, created_at, available_at) "
            "SELECT id, topic, ordering_key, headers, payload, created_at, created_at FROM idem_outbox_intake "
            "WHERE seq <= :last ORDER BY seq",
        // The rows that came in: those up to :last this transaction holds,
        // each now in the outbox under its id, as it was published. A row the
        // copy did not see (its publisher's transaction still open then, or
        // its seq drawn before the range read the intake and its row written
        // after) is not in the outbox: it stays for the next claim, never
        // deleted uncopied.
        .intake_remove =
            "DELETE i FROM (SELECT seq FROM idem_outbox_intake FORCE INDEX (PRIMARY) WHERE seq <= :last "
            "FOR UPDATE SKIP LOCKED) x STRAIGHT_JOIN idem_outbox_intake i FORCE INDEX (PRIMARY) ON i.seq = x.seq "
            "WHERE EXISTS (SELECT 1 FROM idem_outbox o FORCE INDEX (idem_outbox_id) WHERE o.id = i.id "
            "AND o.created_at = i.created_at)",
        .take_free =
            "SELECT o.seq, o.id, o.topic, o.ordering_key, o.headers, o.payload, o.attempts + 1, o.created_at "
            "FROM idem_outbox o FORCE INDEX (idem_outbox_due) WHERE o.state = 0 AND o.available_at <= :now "
            "AND (o.ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM idem_outbox e FORCE INDEX "
            "(idem_outbox_ordering) WHERE e.undelivered_key = o.ordering_key AND e.seq < o.seq)) "
            "ORDER BY o.available_at, o.seq LIMIT :n FOR UPDATE SKIP LOCKED",
        // Each message take_free locked: taken for the claim's token until the lease's end.
        .mark_taken =
            "UPDATE idem_outbox SET attempts = attempts + 1, available_at = :until, claim = :token WHERE id = :id",
        // A message waits when its key's first undelivered message is dead or
        // backing off, or 64 or more come before it (the 64th before it
        // exists); never one whose predecessor is in flight or held by another
        // transaction (held for share here: a settle delivering it waits, then
        // sees what this did). The key's first message and the 64th before
        // are read passing over held rows (see above): a held first message
        // is passed for the one after it, a held one among the 64 is not
        // counted.
        .set_aside =
            "UPDATE (SELECT w.id FROM (SELECT o.id, o.seq, o.ordering_key FROM idem_outbox o FORCE INDEX "
            "(idem_outbox_due) WHERE o.state = 0 AND o.available_at <= :now ORDER BY o.available_at, o.seq "
            "LIMIT :window FOR UPDATE SKIP LOCKED) w WHERE w.ordering_key IS NOT NULL AND ("
            "(SELECT CASE WHEN h.state = 2 OR (h.claim IS NULL AND h.available_at > :stalled_at) THEN 1 "
            "ELSE 0 END FROM idem_outbox h FORCE INDEX (idem_outbox_ordering) WHERE h.undelivered_key = "
            "w.ordering_key ORDER BY h.seq LIMIT 1 LOCK IN SHARE MODE SKIP LOCKED) = 1 "
            "OR (SELECT d.id FROM idem_outbox d FORCE INDEX (idem_outbox_ordering) WHERE d.undelivered_key = "
            "w.ordering_key AND d.seq < w.seq ORDER BY d.seq DESC LIMIT 1 OFFSET 63 LOCK IN SHARE MODE "
            "SKIP LOCKED) IS NOT NULL) "
            "AND (SELECT CASE WHEN p.claim IS NULL OR p.available_at <= :in_flight_at THEN 1 ELSE 0 END "
            "FROM idem_outbox p FORCE INDEX (idem_outbox_ordering) WHERE p.undelivered_key = w.ordering_key "
            "AND p.seq < w.seq ORDER BY p.seq DESC LIMIT 1 LOCK IN SHARE MODE SKIP LOCKED) = 1) x "
            "STRAIGHT_JOIN idem_outbox t FORCE INDEX (idem_outbox_id) ON t.id = x.id SET t.available_at = :until",
        .intake_rows =
            "SELECT seq, id, topic, ordering_key, headers, payload, created_at FROM idem_outbox_intake "
            "ORDER BY seq LIMIT :n",
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
        // Another relay's messages delivered at the same instant, still held
        // by its settle, are passed over, as PostgreSQL's statement does not
        // see them; a key's next message is read with a shared lock, waiting
        // for a transaction that holds it as the UPDATE of it would.
        .release_next =
            "UPDATE (SELECT (SELECT CASE WHEN e.state = 0 AND e.claim IS NULL AND e.available_at > :set_aside "
            "THEN e.id END FROM idem_outbox e FORCE INDEX (idem_outbox_ordering) WHERE e.undelivered_key = "
            "d.ordering_key AND e.seq > d.seq ORDER BY e.seq LIMIT 1) AS id FROM idem_outbox d FORCE INDEX "
            "(idem_outbox_delivered) WHERE d.state = 1 AND d.done_at = :delivered AND d.ordering_key IS NOT NULL "
            "LOCK IN SHARE MODE SKIP LOCKED) x STRAIGHT_JOIN idem_outbox t FORCE INDEX (idem_outbox_id) "
            "ON t.id = x.id SET t.available_at = :due WHERE t.claim IS NULL AND t.available_at > :later",
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
        // Oldest first, passing over rows another transaction holds.
        .purge =
            "DELETE t FROM (SELECT id FROM idem_outbox FORCE INDEX (idem_outbox_delivered) WHERE state = 1 "
            "AND done_at <= :before ORDER BY done_at LIMIT :n FOR UPDATE SKIP LOCKED) x "
            "STRAIGHT_JOIN idem_outbox t FORCE INDEX (idem_outbox_id) ON t.id = x.id",
        .count_delivered = "SELECT COUNT(*) FROM idem_outbox WHERE state = 1 AND done_at <= :before",
        .exists = "SELECT COUNT(*) FROM idem_schema_versions WHERE name LIKE '%outbox'",
        .dead_letters =
            "SELECT id, topic, attempts, last_answer FROM idem_outbox WHERE state = 2 ORDER BY seq LIMIT :n",
    };
    return statements;
}

}  // namespace idem::detail::mariadb
