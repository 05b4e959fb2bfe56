#include "postgresql_records.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>

#include "internal/crypto.hpp"

namespace idem::detail::pg {
namespace {

// READ UNCOMMITTED is READ COMMITTED in PostgreSQL. At a stricter level a
// reserve could not wait for a concurrent duplicate and then see its outcome
// (its snapshot predates it), so the statements refuse to write there.
#define IDEM_READ_COMMITTED "current_setting('transaction_isolation') IN ('read committed', 'read uncommitted')"

bool read_committed(std::string_view level) {
    return level == "read committed" || level == "read uncommitted";
}

// $1 key_hash (the digest's first 16 bytes), $2 namespace (UTF-8 bytes, stored
// as text in whatever encoding the database has), $3 token, $4 fingerprint, $5
// lease, $6 the scope id (lib/sql/record_id.hpp).
// A live entry this statement's snapshot sees is answered from the snapshot,
// without a write: a completed entry cannot change until it expires, and an
// in-flight one is reported as it was. Otherwise it inserts, or takes over an
// expired entry. An entry committed after the snapshot (or still being
// inserted: the INSERT waits for that transaction) stays as it is but is locked
// (ON CONFLICT DO UPDATE locks the row even when its WHERE is false); the
// lookup that follows then sees it.
// Each statement reads the database's clock once (clock_timestamp() is read
// anew at every call), so created_at and expires_at are exactly a span apart.
constexpr Oid reserve_types[] = {bytea_oid, bytea_oid, bytea_oid, bytea_oid, interval_oid, bytea_oid};
constexpr statement_text reserve_text{R"(
WITH live AS (
    SELECT completed, fingerprint, payload FROM idem_records
    WHERE key_hash = $1 AND expires_at > clock_timestamp()),
remembered AS (
    SELECT fingerprint FROM idem_tombstones WHERE key_hash = $1 AND forget_at > clock_timestamp()),
reserved AS (
    INSERT INTO idem_records AS r
        (key_hash, namespace, token, fingerprint, payload, completed, created_at, expires_at, scope_id)
    SELECT $1, convert_from($2, 'UTF8'), $3, $4, NULL, false, clock.now, clock.now + $5, $6
    FROM (SELECT clock_timestamp() AS now) AS clock
    WHERE )" IDEM_READ_COMMITTED R"( AND NOT EXISTS (SELECT FROM live) AND NOT EXISTS (SELECT FROM remembered)
    ON CONFLICT (key_hash) DO UPDATE
        SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint, payload = NULL, completed = false,
            created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, scope_id = EXCLUDED.scope_id
        WHERE r.expires_at <= EXCLUDED.created_at
    RETURNING 1)
SELECT current_setting('transaction_isolation'), EXISTS (SELECT FROM reserved),
       live.completed, live.fingerprint, live.payload, (SELECT fingerprint FROM remembered)
FROM (SELECT) AS answer LEFT JOIN live ON true)",
                                      reserve_types, "reserving a record"};

// In the caller's transaction nothing is read first: most reserves there are of
// fresh keys, and the INSERT itself is what makes a concurrent duplicate wait.
// It writes only at READ COMMITTED, and not over a live tombstone; when it
// returns no row the lookup below tells why.
constexpr statement_text reserve_in_text{R"(
INSERT INTO idem_records AS r
    (key_hash, namespace, token, fingerprint, payload, completed, created_at, expires_at, scope_id)
SELECT $1, convert_from($2, 'UTF8'), $3, $4, NULL, false, clock.now, clock.now + $5, $6
FROM (SELECT clock_timestamp() AS now) AS clock
WHERE )" IDEM_READ_COMMITTED R"(
  AND NOT EXISTS (SELECT FROM idem_tombstones WHERE key_hash = $1 AND forget_at > clock.now)
ON CONFLICT (key_hash) DO UPDATE
    SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint, payload = NULL, completed = false,
        created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, scope_id = EXCLUDED.scope_id
    WHERE r.expires_at <= EXCLUDED.created_at
RETURNING 1)",
                                         reserve_types, "reserving a record"};

// After a reserve that wrote nothing: the entry in the way (locked, so it
// cannot change before this transaction ends), with the isolation level; no
// row at all means the reserve was refused (a stricter level) or the entry vanished.
constexpr Oid lookup_types[] = {bytea_oid};
constexpr statement_text lookup_text{R"(
SELECT current_setting('transaction_isolation'), r.completed, r.fingerprint, r.payload, r.live,
       (SELECT fingerprint FROM idem_tombstones WHERE key_hash = $1 AND forget_at > clock_timestamp())
FROM (SELECT) AS answer LEFT JOIN LATERAL (
    SELECT completed, fingerprint, payload, expires_at > clock_timestamp() AS live
    FROM idem_records WHERE key_hash = $1 FOR UPDATE) AS r ON true)",
                                     lookup_types, "reading a record"};

// The one-statement form's lookup, pipelined with the held-back BEGIN: a plain
// read (a completed record cannot change until it expires), with the isolation
// level, so that the insert below is only ever sent at READ COMMITTED.
constexpr statement_text look_up_text{R"(
SELECT current_setting('transaction_isolation'), r.completed, r.fingerprint, r.payload, r.live,
       (SELECT fingerprint FROM idem_tombstones WHERE key_hash = $1 AND forget_at > clock_timestamp())
FROM (SELECT) AS answer LEFT JOIN (
    SELECT completed, fingerprint, payload, expires_at > clock_timestamp() AS live
    FROM idem_records WHERE key_hash = $1) AS r ON true)",
                                      lookup_types, "looking a record up"};

// The one-statement form's record, sent with COMMIT after the work: a plain
// INSERT, which waits for a concurrent transaction inserting the same key and
// fails (23505 on idem_records_pkey) when that one commits, so that the COMMIT
// behind it cannot commit the business writes of a duplicate.
// $5 payload, $6 completed (else in flight, and $5 ignored), $7 retention or lease;
// $8 the fingerprint's digest and $9 the remembered window (both NULL: none) for
// the key's tombstone, written by the same statement; $10 the scope id.
constexpr Oid insert_types[] = {bytea_oid, bytea_oid,    bytea_oid, bytea_oid,    bytea_oid,
                                bool_oid,  interval_oid, bytea_oid, interval_oid, bytea_oid};
constexpr statement_text insert_text{R"(
WITH inserted AS (
    INSERT INTO idem_records
        (key_hash, namespace, token, fingerprint, payload, completed, created_at, expires_at, scope_id)
    SELECT $1, convert_from($2, 'UTF8'), $3, $4, CASE WHEN $6 THEN $5 END, $6, clock.now, clock.now + $7, $10
    FROM (SELECT clock_timestamp() AS now) AS clock
    RETURNING key_hash, created_at),
remembered AS (
    INSERT INTO idem_tombstones (key_hash, fingerprint, forget_at)
    SELECT key_hash, $8, created_at + $9 FROM inserted WHERE $9 IS NOT NULL
    ON CONFLICT (key_hash) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, forget_at = EXCLUDED.forget_at)
SELECT)",
                                     insert_types, "inserting a record"};

// $5 payload, $6 retention. A live entry with another token, or a completed
// one, stays as it is. $7 the fingerprint's digest and $8 the remembered window
// (both NULL: none): the key's tombstone, when it completed. $9 the scope id.
constexpr Oid complete_types[] = {bytea_oid,    bytea_oid, bytea_oid,    bytea_oid, bytea_oid,
                                  interval_oid, bytea_oid, interval_oid, bytea_oid};
constexpr statement_text complete_text{R"(
WITH completed AS (
    INSERT INTO idem_records AS r
        (key_hash, namespace, token, fingerprint, payload, completed, created_at, expires_at, scope_id)
    SELECT $1, convert_from($2, 'UTF8'), $3, $4, $5, true, clock.now, clock.now + $6, $9
    FROM (SELECT clock_timestamp() AS now) AS clock
    WHERE )" IDEM_READ_COMMITTED R"(
    ON CONFLICT (key_hash) DO UPDATE
        SET token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint, payload = EXCLUDED.payload, completed = true,
            created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, scope_id = EXCLUDED.scope_id
        WHERE r.expires_at <= EXCLUDED.created_at OR (NOT r.completed AND r.token = EXCLUDED.token)
    RETURNING key_hash, created_at),
remembered AS (
    INSERT INTO idem_tombstones (key_hash, fingerprint, forget_at)
    SELECT key_hash, $7, created_at + $8 FROM completed WHERE $8 IS NOT NULL
    ON CONFLICT (key_hash) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, forget_at = EXCLUDED.forget_at)
SELECT current_setting('transaction_isolation'), EXISTS (SELECT FROM completed))",
                                       complete_types, "completing a record"};

// Sent with COMMIT, only by the transaction that reserved the key: its row is
// there, carries this token and is locked by this transaction, so a plain
// UPDATE does (the reserve checked the isolation level and wrote the
// fingerprint). Completing nothing must fail, so that the COMMIT behind it does
// not happen: the text cast to boolean below then raises 22P02 with this message.
// $1 key_hash, $2 token, $3 payload, $4 retention; $5 the fingerprint's digest
// and $6 the remembered window (both NULL: none), for the key's tombstone.
constexpr Oid complete_at_commit_types[] = {bytea_oid, bytea_oid, bytea_oid, interval_oid, bytea_oid, interval_oid};
constexpr statement_text complete_at_commit_text{R"(
WITH completed AS (
    UPDATE idem_records SET payload = $3, completed = true, created_at = clock.now, expires_at = clock.now + $4
    FROM (SELECT clock_timestamp() AS now) AS clock
    WHERE key_hash = $1 AND token = $2 AND NOT completed
    RETURNING key_hash, created_at),
remembered AS (
    INSERT INTO idem_tombstones (key_hash, fingerprint, forget_at)
    SELECT key_hash, $5, created_at + $6 FROM completed WHERE $6 IS NOT NULL
    ON CONFLICT (key_hash) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, forget_at = EXCLUDED.forget_at)
SELECT (CASE WHEN EXISTS (SELECT FROM completed) THEN 'true'
             ELSE 'idem: the record this transaction reserved could not be completed' END)::boolean)",
                                                 complete_at_commit_types, "completing a record at commit"};

constexpr Oid release_types[] = {bytea_oid, bytea_oid};
constexpr statement_text release_text{R"(
WITH released AS (
    DELETE FROM idem_records
    WHERE key_hash = $1 AND token = $2 AND NOT completed AND expires_at > clock_timestamp()
      AND )" IDEM_READ_COMMITTED R"(
    RETURNING 1)
SELECT current_setting('transaction_isolation'), EXISTS (SELECT FROM released))",
                                      release_types, "releasing a record"};

constexpr Oid inspect_types[] = {bytea_oid, bool_oid};
constexpr statement_text inspect_text{R"(
SELECT completed, created_at, expires_at, clock_timestamp(), namespace,
       coalesce(octet_length(payload), 0)::bigint, CASE WHEN $2 THEN payload END
FROM idem_records WHERE key_hash = $1)",
                                      inspect_types, "inspecting a record"};

// No index covers namespace: a sequential scan of the table, keeping the
// newest $2 rows as it goes (a top-N sort). The clock is read once (an InitPlan).
constexpr Oid recent_types[] = {bytea_oid, int8_oid};
constexpr statement_text recent_text{R"(
SELECT key_hash, completed, created_at, expires_at, (SELECT clock_timestamp()),
       coalesce(octet_length(payload), 0)::bigint
FROM idem_records WHERE namespace = convert_from($1, 'UTF8')
ORDER BY created_at DESC, key_hash LIMIT $2)",
                                     recent_types, "listing recent records"};

// A record completed at or after $2 expires after it (a retention is positive),
// so the rows that expired before $2 need not be read: the planner walks the
// expires_at index from $2 when that range is a small part of the table, else
// scans it. $2 is the time since the Unix epoch, as an interval.
// $4 a scope id, or NULL for every scope.
constexpr Oid completed_since_types[] = {bytea_oid, interval_oid, int8_oid, bytea_oid};
constexpr statement_text completed_since_text{R"(
SELECT key_hash, completed, created_at, expires_at, (SELECT clock_timestamp()),
       coalesce(octet_length(payload), 0)::bigint
FROM idem_records
WHERE expires_at > timestamptz 'epoch' + $2 AND namespace = convert_from($1, 'UTF8') AND completed
  AND created_at >= timestamptz 'epoch' + $2 AND ($4::bytea IS NULL OR scope_id = $4)
ORDER BY created_at DESC, key_hash LIMIT $3)",
                                              completed_since_types, "listing records completed since a time"};

// Deletes the row unless it is in flight ($2: force); the condition is checked
// on the row's latest version, under its lock, so a row reserved meanwhile is
// kept. Answers the row deleted, in the columns of inspect_text.
constexpr Oid forget_types[] = {bytea_oid, bool_oid};
constexpr statement_text forget_text{R"(
DELETE FROM idem_records
WHERE key_hash = $1 AND (completed OR expires_at <= clock_timestamp() OR $2)
RETURNING completed, created_at, expires_at, clock_timestamp(), namespace, coalesce(octet_length(payload), 0)::bigint)",
                                     forget_types, "deleting a record"};

// A remembered key's tombstone, deleted with its record or alone: when it would
// have been forgotten, and the clock.
constexpr Oid forget_tombstone_types[] = {bytea_oid};
constexpr statement_text forget_tombstone_text{R"(
DELETE FROM idem_tombstones WHERE key_hash = $1 RETURNING forget_at, clock_timestamp())",
                                               forget_tombstone_types, "deleting a tombstone"};

// The threshold is read once (an InitPlan): clock_timestamp() itself is
// volatile. Counting reads the expired rows' entries of the expires_at index,
// and those of tombstones whose window ended in the forget_at index.
constexpr Oid count_expired_types[] = {interval_oid};
constexpr statement_text count_expired_text{R"(
SELECT (SELECT count(*) FROM idem_records WHERE expires_at <= (SELECT clock_timestamp() - $1))
     + (SELECT count(*) FROM idem_tombstones WHERE forget_at <= (SELECT clock_timestamp() - $1)))",
                                            count_expired_types, "counting expired records"};

// Earliest expiry first, through the expires_at index, which the scan leaves
// at the first row still live: a batch reads only rows it may delete.
// SKIP LOCKED: concurrent purges take disjoint rows and never wait, and a row a
// reserve is taking over right now is left to it. Locking re-checks the
// condition on the row's latest version, so a row revived meanwhile is spared.
// = ANY (ARRAY(...)) deletes through the primary key whatever the table's size.
constexpr Oid purge_types[] = {interval_oid, int8_oid};
constexpr statement_text purge_text{R"(
DELETE FROM idem_records WHERE key_hash = ANY (ARRAY(
    SELECT key_hash FROM idem_records WHERE expires_at <= (SELECT clock_timestamp() - $1)
    ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)))",
                                    purge_types, "purging expired records"};

// Tombstones whose window ended, the same way through the forget_at index.
constexpr statement_text forget_ended_text{R"(
DELETE FROM idem_tombstones WHERE key_hash = ANY (ARRAY(
    SELECT key_hash FROM idem_tombstones WHERE forget_at <= (SELECT clock_timestamp() - $1)
    ORDER BY forget_at LIMIT $2 FOR UPDATE SKIP LOCKED)))",
                                           purge_types, "purging tombstones"};

// rewrite_payloads' walk in key-hash order, through the primary key: a batch
// reads only the rows it hands over. An empty bytea sorts before every key hash.
constexpr Oid payloads_after_types[] = {bytea_oid, int8_oid};
constexpr statement_text payloads_after_text{R"(
SELECT key_hash, payload FROM idem_records WHERE key_hash > $1 AND completed ORDER BY key_hash LIMIT $2)",
                                             payloads_after_types, "reading stored payloads"};

// Only over the payload just read: a row written anew meanwhile keeps its own.
constexpr Oid rewrite_payload_types[] = {bytea_oid, bytea_oid, bytea_oid};
constexpr statement_text rewrite_payload_text{R"(
UPDATE idem_records SET payload = $3 WHERE key_hash = $1 AND completed AND payload = $2)",
                                              rewrite_payload_types, "rewriting a stored payload"};

constexpr statement_text commit_text{"COMMIT", {}, "COMMIT"};

#undef IDEM_READ_COMMITTED

[[noreturn]] void corrupt(const record_key& key, const char* why) {
    throw store_error(store_failure::corrupt_record, "idem: the record " + key.key_hash() + " is corrupt: " + why);
}

// A tombstone's two parameters: the fingerprint's digest and the remembered
// window, or two NULLs when the key is not remembered.
void bind_remember(parameters& p, const std::string& digest, duration remember) {
    if (remember > duration::zero())
        p.bytes(digest).interval(remember);
    else
        p.null().null();
}

[[nodiscard]] std::string digest_if(std::string_view fingerprint, duration remember) {
    return remember > duration::zero() ? fingerprint_digest(fingerprint) : std::string();
}

// The record's primary key and namespace as statement parameters 1 and 2.
// $1 and $2 of the statements that write a row, and the scope id their last
// parameter takes (bind_scope(), after the others).
struct identity {
    std::string scratch;
    scope_id_type scope{};
    void bind(parameters& p, const record_key& key) {
        scope = scope_id(key.owner());
        p.bytes(record_id(key.digest())).bytes(readable(key.name_space(), scratch));
    }
    void bind_scope(parameters& p) const { p.bytes(scope); }
};

}  // namespace

std::string_view readable(std::string_view part, std::string& scratch) {
    if (part.find('\0') == std::string_view::npos) return part;
    scratch.clear();
    for (char c : part) {
        if (c == '\0')
            scratch += "\xEF\xBF\xBD";
        else
            scratch += c;
    }
    return scratch;
}

// A statement of these sent with COMMIT, which goes out prepared too.
class record_statements::at_commit : public deferred {
public:
    explicit at_commit(std::shared_ptr<record_statements> owner) : owner_(std::move(owner)) {}

    void queue_commit(pipeline& p) override {
        const parameters none;
        owner_->commit_.queue(p, none);
    }

protected:
    std::shared_ptr<record_statements> owner_;
};

// The completing statement of the one-statement form (database::once), sent with COMMIT: it
// keeps copies of its values, since the caller's are gone by then.
class record_statements::completion final : public at_commit {
public:
    completion(std::shared_ptr<record_statements> owner, const record_key& key, std::string_view token,
               std::string_view fingerprint, std::string_view payload, duration retention, duration remember)
        : at_commit(std::move(owner)),
          digest_(key.digest()),
          token_(token),
          payload_(payload),
          fingerprint_digest_(digest_if(fingerprint, remember)),
          retention_(retention),
          remember_(remember) {}

    void queue(pipeline& p) override {
        values_.bytes(record_id(digest_)).bytes(token_).bytes(payload_).interval(retention_);
        bind_remember(values_, fingerprint_digest_, remember_);
        owner_->complete_at_commit_.queue(p, values_);
    }

private:
    std::array<std::byte, 32> digest_;
    std::string token_, payload_, fingerprint_digest_;
    duration retention_, remember_;
    parameters values_;
};

// The one-statement form's record (see insert_text), sent with COMMIT; it keeps
// copies of its values, since the caller's are gone by then.
class record_statements::insertion final : public at_commit {
public:
    insertion(std::shared_ptr<record_statements> owner, const record_key& key, std::string_view fingerprint,
              std::optional<std::string_view> payload, duration span, duration remember)
        : at_commit(std::move(owner)),
          digest_(key.digest()),
          scope_(scope_id(key.owner())),
          name_space_(readable(key.name_space(), scratch_)),
          token_(unheld_token),
          fingerprint_(fingerprint),
          payload_(payload.value_or(std::string_view())),
          completed_(payload.has_value()),
          span_(span),
          fingerprint_digest_(digest_if(fingerprint, remember)),
          remember_(remember) {}

    void queue(pipeline& p) override {
        values_.bytes(record_id(digest_)).bytes(name_space_);
        values_.bytes(token_).bytes(fingerprint_).bytes(payload_).boolean(completed_).interval(span_);
        bind_remember(values_, fingerprint_digest_, remember_);
        values_.bytes(scope_);
        first_ = p.size();
        owner_->insert_.queue(p, values_);
        last_ = p.size();
    }

    void failed(const pipeline& p) override {
        for (std::size_t n = first_; n < last_; ++n) raise_if_taken(p.outcome(n));
    }

private:
    std::array<std::byte, 32> digest_;
    scope_id_type scope_;
    std::string scratch_;
    std::string name_space_;  // as readable text
    std::string token_, fingerprint_, payload_;
    bool completed_;
    duration span_;
    std::string fingerprint_digest_;
    duration remember_;
    parameters values_;
    std::size_t first_ = 0, last_ = 0;
};

void raise_if_taken(const result& r) {
    if (r.get() == nullptr) return;
    const char* sqlstate = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    const char* constraint = PQresultErrorField(r.get(), PG_DIAG_CONSTRAINT_NAME);
    if (sqlstate == nullptr || constraint == nullptr) return;
    if (std::string_view(sqlstate) != "23505" || std::string_view(constraint) != "idem_records_pkey") return;
    throw store_error(store_failure::lost_race,
                      "idem: inserting a record failed: a concurrent transaction committed the same key first "
                      "(SQLSTATE 23505)",
                      "23505");
}

// A statement's (level, done) answer; store_error(unsupported) below READ COMMITTED.
bool done_at_read_committed(const result& r, std::string_view what) {
    if (r.rows() != 1) throw store_error(store_failure::other, "idem: " + std::string(what) + ": no answer row");
    const std::string_view level = r.bytes(0, 0);
    if (!read_committed(level))
        throw store_error(store_failure::unsupported,
                          "idem: " + std::string(what) +
                              " refused: the PostgreSQL store needs READ COMMITTED transactions; this one runs at " +
                              std::string(level));
    return r.boolean(0, 1);
}

namespace {

// The answer a live entry gives: columns (completed, fingerprint, payload) from `first`.
reservation live_answer(const result& row, int first, const record_key& key, std::string_view fingerprint) {
    const bool completed = row.boolean(0, first);
    if (row.is_null(0, first + 1) || row.bytes(0, first + 1).empty()) corrupt(key, "missing fingerprint");
    if (completed && row.is_null(0, first + 2)) corrupt(key, "completed without a payload");
    if (row.bytes(0, first + 1) != fingerprint) return reservation::fingerprint_mismatch();
    if (completed) return reservation::completed(std::string(row.bytes(0, first + 2)));
    return reservation::in_flight();
}

// The answer a live tombstone gives: its fingerprint digest in `column`.
reservation tombstone_answer(const result& row, int column, const record_key& key, std::string_view fingerprint) {
    const std::string_view stored = row.bytes(0, column);
    if (stored.size() != fingerprint_digest_bytes) corrupt(key, "its tombstone's fingerprint is malformed");
    if (stored != fingerprint_digest(fingerprint)) return reservation::fingerprint_mismatch();
    return reservation::expired();
}

}  // namespace

std::optional<reservation> reserve_answer(const result& row, const record_key& key, std::string_view fingerprint,
                                          std::string_view token) {
    if (done_at_read_committed(row, reserve_text.what)) return reservation::reserved(std::string(token));
    if (!row.is_null(0, 2)) return live_answer(row, 2, key, fingerprint);
    if (!row.is_null(0, 5)) return tombstone_answer(row, 5, key, fingerprint);
    return std::nullopt;
}

namespace {

void require_read_committed(const result& row, std::string_view what) {
    const std::string_view level = row.bytes(0, 0);
    if (!read_committed(level))
        throw store_error(store_failure::unsupported, "idem: " + std::string(what) +
                                                          " refused: the PostgreSQL store needs READ COMMITTED "
                                                          "transactions; this one runs at " +
                                                          std::string(level));
}

}  // namespace

std::optional<reservation> locked_answer(const result& row, const record_key& key, std::string_view fingerprint) {
    require_read_committed(row, "reserving a record");
    if (!row.is_null(0, 4) && row.boolean(0, 4)) return live_answer(row, 1, key, fingerprint);
    if (!row.is_null(0, 5)) return tombstone_answer(row, 5, key, fingerprint);
    return std::nullopt;  // gone or expired since the reserve: try again
}

record_lookup looked_up(const result& row, const record_key& key, std::string_view fingerprint, bool tells_level) {
    if (tells_level) require_read_committed(row, "looking a record up");
    if ((row.is_null(0, 4) || !row.boolean(0, 4)) && !row.is_null(0, 5))
        return {record_lookup::found::answer, tombstone_answer(row, 5, key, fingerprint)};  // remembered
    if (row.is_null(0, 4)) return {record_lookup::found::nothing, {}};
    if (!row.boolean(0, 4)) return {record_lookup::found::reserve, {}};  // expired: to take over
    reservation answer = live_answer(row, 1, key, fingerprint);
    if (answer.status == reservation_status::in_flight) return {record_lookup::found::reserve, {}};
    return {record_lookup::found::answer, std::move(answer)};
}

std::optional<record_state> inspected(const result& row, bool with_payload) {
    if (row.rows() == 0) return std::nullopt;
    record_state s;
    s.completed = row.boolean(0, 0);
    s.created_at = row.timestamp(0, 1);
    s.expires_at = row.timestamp(0, 2);
    s.now = row.timestamp(0, 3);
    s.name_space = row.bytes(0, 4);
    s.payload_bytes = static_cast<std::size_t>(row.int8(0, 5));
    if (with_payload && !row.is_null(0, 6)) s.payload = std::string(row.bytes(0, 6));
    return s;
}

record_statements::record_statements(PGconn* conn, bool named)
    : conn_(conn),
      backend_pid_(PQbackendPID(conn)),
      prefix_(named ? statement_names() : std::string()),
      reserve_{&reserve_text, name("reserve")},
      reserve_in_{&reserve_in_text, name("reserve_in")},
      lookup_{&lookup_text, name("lookup")},
      look_up_{&look_up_text, name("look_up")},
      insert_{&insert_text, name("insert")},
      complete_{&complete_text, name("complete")},
      complete_at_commit_{&complete_at_commit_text, name("complete_at_commit")},
      release_{&release_text, name("release")},
      inspect_{&inspect_text, name("inspect")},
      recent_{&recent_text, name("recent")},
      completed_since_{&completed_since_text, name("completed_since")},
      forget_{&forget_text, name("forget")},
      forget_tombstone_{&forget_tombstone_text, name("forget_tombstone")},
      count_expired_{&count_expired_text, name("count_expired")},
      purge_{&purge_text, name("purge")},
      forget_ended_{&forget_ended_text, name("forget_ended")},
      payloads_after_{&payloads_after_text, name("payloads_after")},
      rewrite_payload_{&rewrite_payload_text, name("rewrite_payload")},
      begin_{&begin_text_, name("begin")},
      commit_{&commit_text, name("commit")} {}

std::string record_statements::name(std::string_view operation) const {
    return prefix_.empty() ? std::string() : prefix_ + std::string(operation);
}

bool record_statements::serves(const PGconn* conn) const noexcept {
    return conn == conn_ && PQbackendPID(conn) == backend_pid_;
}

bool record_statements::reserved_in(std::uint64_t serial, const record_key& key,
                                    std::string_view token) const noexcept {
    return serial != 0 && serial == reserved_serial_ && key.digest() == reserved_digest_ && token == reserved_token_;
}

reservation record_statements::try_reserve(const record_key& key, std::string_view fingerprint, std::string_view token,
                                           duration lease) {
    identity id;
    parameters values;
    id.bind(values, key);
    values.bytes(token).bytes(fingerprint).interval(lease);
    id.bind_scope(values);
    // Between two statements an entry can change (it expired, or was released
    // or purged): then reserve again.
    for (int attempt = 0; attempt < 8; ++attempt) {
        pipeline p(conn_);
        reserve_.queue(p, values);
        p.run();
        if (auto answer = reserve_answer(p.last(), key, fingerprint, token)) return std::move(*answer);
        if (auto live = locked_entry(key, fingerprint)) return std::move(*live);
    }
    throw changing(key);
}

reservation record_statements::try_reserve_in(const record_key& key, std::string_view fingerprint,
                                              std::string_view token, duration lease, fast_path* tx) {
    identity id;
    parameters values;
    id.bind(values, key);
    values.bytes(token).bytes(fingerprint).interval(lease);
    id.bind_scope(values);
    for (int attempt = 0; attempt < 8; ++attempt) {
        pipeline p(conn_);
        if (tx != nullptr && tx->held_begin() != nullptr) queue_begin(p, *tx);
        reserve_in_.queue(p, values);
        p.run();
        if (p.last().rows() == 1) {
            if (tx != nullptr) {
                reserved_serial_ = tx->serial();
                reserved_digest_ = key.digest();
                reserved_token_.assign(token);
            }
            return reservation::reserved(std::string(token));
        }
        if (auto live = locked_entry(key, fingerprint)) return std::move(*live);
    }
    throw changing(key);
}

record_lookup record_statements::look_up(const record_key& key, std::string_view fingerprint, fast_path* tx) {
    parameters by_hash;
    by_hash.bytes(record_id(key.digest()));
    const char* begin = tx != nullptr ? tx->held_begin() : nullptr;
    const isolation_level level = tx != nullptr ? tx->isolation() : isolation_level::database_default;
    // Before BEGIN the lookup runs at the session's default level: the
    // transaction's own when BEGIN names none, and beside the point when it names
    // READ COMMITTED. Before a BEGIN naming another level it could not refuse it.
    const bool before_begin = begin != nullptr && mostly_answered() &&
                              (level == isolation_level::database_default || level == isolation_level::read_committed);
    pipeline p(conn_);
    if (begin != nullptr && !before_begin) queue_begin(p, *tx);
    look_up_.queue(p, by_hash);
    p.run();
    record_lookup found =
        looked_up(p.last(), key, fingerprint, !before_begin || level != isolation_level::read_committed);
    if (found.what != record_lookup::found::reserve)  // a reserve sends BEGIN with it either way
        answered_ = static_cast<std::uint8_t>(answered_ << 1 | (found.what == record_lookup::found::answer ? 1 : 0));
    if (before_begin && found.what == record_lookup::found::nothing) {
        // The work runs next, in the transaction, however it reaches the session.
        pipeline b(conn_);
        queue_begin(b, *tx);
        b.run();
    }
    return found;
}

void record_statements::queue_begin(pipeline& p, fast_path& tx) {
    const char* begin = tx.held_begin();
    if (begin_text_.sql == nullptr) begin_text_.sql = begin;
    if (begin == begin_text_.sql) {
        const parameters none;
        begin_.queue(p, none);
    } else {
        p.query(begin, "BEGIN");  // not the runner these statements belong to
    }
    tx.begin_sent();  // before it runs: a BEGIN that fails midway is still ended by ROLLBACK
}

std::unique_ptr<deferred> record_statements::insert_at_commit(const record_key& key, std::string_view fingerprint,
                                                              std::optional<std::string_view> payload, duration span,
                                                              duration remember) {
    return std::make_unique<insertion>(shared_from_this(), key, fingerprint, payload, span, remember);
}

void record_statements::insert(const record_key& key, std::string_view fingerprint,
                               std::optional<std::string_view> payload, duration span, duration remember) {
    const std::unique_ptr<deferred> now = insert_at_commit(key, fingerprint, payload, span, remember);
    pipeline p(conn_);
    now->queue(p);
    try {
        p.run();
    } catch (const store_error&) {
        now->failed(p);
        throw;
    }
}

std::optional<reservation> record_statements::locked_entry(const record_key& key, std::string_view fingerprint) {
    parameters by_hash;
    by_hash.bytes(record_id(key.digest()));
    pipeline p(conn_);
    lookup_.queue(p, by_hash);
    p.run();
    return locked_answer(p.last(), key, fingerprint);
}

store_error record_statements::changing(const record_key& key) {
    return store_error(store_failure::conflict,
                       "idem: reserving the record " + key.key_hash() + " failed: it kept changing under the reserve");
}

bool record_statements::run_checked(prepared_statement& s, const parameters& values) {
    pipeline p(conn_);
    s.queue(p, values);
    p.run();
    return done_at_read_committed(p.last(), s.text->what);
}

bool record_statements::complete(const record_key& key, std::string_view token, std::string_view fingerprint,
                                 std::string_view payload, duration retention, duration remember) {
    identity id;
    parameters values;
    id.bind(values, key);
    values.bytes(token).bytes(fingerprint).bytes(payload).interval(retention);
    const std::string digest = digest_if(fingerprint, remember);
    bind_remember(values, digest, remember);
    id.bind_scope(values);
    return run_checked(complete_, values);
}

std::unique_ptr<deferred> record_statements::complete_at_commit(const record_key& key, std::string_view token,
                                                                std::string_view fingerprint, std::string_view payload,
                                                                duration retention, duration remember) {
    return std::make_unique<completion>(shared_from_this(), key, token, fingerprint, payload, retention, remember);
}

bool record_statements::release(const record_key& key, std::string_view token) {
    parameters values;
    values.bytes(record_id(key.digest())).bytes(token);
    return run_checked(release_, values);
}

std::optional<record_state> record_statements::inspect(const record_id_type& id, bool with_payload) {
    parameters values;
    values.bytes(id).boolean(with_payload);
    pipeline p(conn_);
    inspect_.queue(p, values);
    p.run();
    return inspected(p.last(), with_payload);
}

std::vector<listed_record> record_statements::recent(std::string_view name_space, std::size_t limit) {
    std::string scratch;
    parameters values;
    values.bytes(readable(name_space, scratch)).int8(static_cast<std::int64_t>(limit));
    pipeline p(conn_);
    recent_.queue(p, values);
    p.run();
    return listed(p.last(), name_space);
}

std::vector<listed_record> record_statements::completed_since(std::string_view name_space,
                                                              const std::optional<scope_id_type>& owner,
                                                              time_point since, std::size_t limit) {
    std::string scratch;
    parameters values;
    // Not before the epoch: a timestamp holds no time_point::min().
    values.bytes(readable(name_space, scratch))
        .interval(std::max(since.time_since_epoch(), duration::zero()))
        .int8(static_cast<std::int64_t>(limit));
    if (owner)
        values.bytes(*owner);
    else
        values.null();
    pipeline p(conn_);
    completed_since_.queue(p, values);
    p.run();
    return listed(p.last(), name_space);
}

std::vector<listed_record> record_statements::listed(const result& r, std::string_view name_space) {
    std::vector<listed_record> out;
    for (int row = 0; row < r.rows(); ++row) {
        const std::string_view hash = r.bytes(row, 0);
        if (hash.size() != record_id_bytes)
            throw store_error(store_failure::corrupt_record,
                              "idem: a record of this namespace is corrupt: its key_hash is not 16 bytes");
        listed_record l;
        std::memcpy(l.key_hash.data(), hash.data(), record_id_bytes);
        l.state.completed = r.boolean(row, 1);
        l.state.created_at = r.timestamp(row, 2);
        l.state.expires_at = r.timestamp(row, 3);
        l.state.now = r.timestamp(row, 4);
        l.state.name_space = std::string(name_space);
        l.state.payload_bytes = static_cast<std::size_t>(r.int8(row, 5));
        out.push_back(std::move(l));
    }
    return out;
}

forget_result record_statements::forget(const record_id_type& id, bool force) {
    parameters values;
    values.bytes(id).boolean(force);
    // Nothing deleted: the row is absent, or in flight. Between the DELETE and the
    // look that tells which, it may have completed or expired: then delete again.
    for (int attempt = 0; attempt < 8; ++attempt) {
        pipeline p(conn_);
        forget_.queue(p, values);
        p.run();
        if (auto deleted = inspected(p.last(), false)) {
            forget_result r{forget_outcome::deleted, std::move(*deleted)};
            r.tombstone = forget_tombstone(id).has_value();
            return r;
        }
        std::optional<record_state> kept = inspect(id, false);
        if (!kept) {
            std::optional<record_state> remembered = forget_tombstone(id);
            if (!remembered) return {forget_outcome::not_found, {}};
            return {forget_outcome::tombstone_deleted, std::move(*remembered), true};
        }
        if (!kept->completed && !kept->expired()) return {forget_outcome::refused_in_flight, std::move(*kept)};
    }
    throw store_error(store_failure::conflict,
                      "idem: deleting the record " + hex(std::span(id).first(8)) + " failed: it kept changing");
}

std::optional<record_state> record_statements::forget_tombstone(const record_id_type& id) {
    parameters values;
    values.bytes(id);
    pipeline p(conn_);
    forget_tombstone_.queue(p, values);
    p.run();
    const result& r = p.last();
    if (r.rows() == 0) return std::nullopt;
    record_state s;
    s.completed = true;
    s.expires_at = r.timestamp(0, 0);
    s.now = r.timestamp(0, 1);
    return s;
}

std::size_t record_statements::count_expired(duration older_than) {
    parameters values;
    values.interval(older_than);
    pipeline p(conn_);
    count_expired_.queue(p, values);
    p.run();
    return static_cast<std::size_t>(p.last().int8(0, 0));
}

std::size_t record_statements::purge(std::size_t limit, duration older_than) {
    parameters values;
    values.interval(older_than)
        .int8(static_cast<std::int64_t>(std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max())));
    std::size_t deleted = 0;
    {
        pipeline p(conn_);
        purge_.queue(p, values);
        p.run();
        deleted = p.last().affected();
    }
    if (deleted >= limit) return deleted;
    // Then the tombstones whose window ended, within the same bound.
    parameters rest;
    rest.interval(older_than)
        .int8(static_cast<std::int64_t>(
            std::min<std::size_t>(limit - deleted, std::numeric_limits<std::int64_t>::max())));
    pipeline p(conn_);
    forget_ended_.queue(p, rest);
    p.run();
    return deleted + p.last().affected();
}

rewrite_progress record_statements::rewrite_payloads(const std::optional<record_id_type>& after, std::size_t limit,
                                                     const payload_rewrite& rewrite) {
    struct row {
        record_id_type key_hash;
        std::string payload;
        std::optional<std::string> replacement;
    };
    std::vector<row> rows;
    {
        parameters values;
        if (after)
            values.bytes(*after);
        else
            values.bytes(std::string_view());
        values.int8(static_cast<std::int64_t>(std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max())));
        pipeline p(conn_);
        payloads_after_.queue(p, values);
        p.run();
        const result& r = p.last();
        for (int i = 0; i < r.rows(); ++i) {
            const std::string_view hash = r.bytes(i, 0);
            if (hash.size() != record_id_bytes || r.is_null(i, 1))
                throw store_error(store_failure::corrupt_record,
                                  "idem: a completed record is corrupt: it does not have the shape idem writes");
            row out;
            std::memcpy(out.key_hash.data(), hash.data(), record_id_bytes);
            out.payload = std::string(r.bytes(i, 1));
            rows.push_back(std::move(out));
        }
    }
    rewrite_progress progress;
    progress.read = rows.size();
    if (rows.size() == limit) progress.next = rows.back().key_hash;
    // Every replacement first: when `rewrite` throws, nothing has been sent.
    for (row& r : rows) r.replacement = rewrite({.key_hash = r.key_hash, .payload = r.payload});
    // Then the writes in one round trip, one implicit transaction (the pipeline's one Sync).
    std::deque<parameters> values;
    pipeline p(conn_);
    for (const row& r : rows) {
        if (!r.replacement) continue;
        values.emplace_back().bytes(r.key_hash).bytes(r.payload).bytes(*r.replacement);
        rewrite_payload_.queue(p, values.back());
    }
    if (values.empty()) return progress;
    p.run();
    for (std::size_t i = 0; i < p.size(); ++i)
        if (p.outcome(i).status() == PGRES_COMMAND_OK) progress.rewritten += p.outcome(i).affected();
    return progress;
}

}  // namespace idem::detail::pg
