#include "mariadb_records.hpp"

#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <string>

#include "internal/crypto.hpp"
#include "internal/saturating_time.hpp"
#include "mariadb_native.hpp"
#include "mariadb_pipeline.hpp"
#include "sql/unnamed_statement.hpp"

namespace idem::detail::mariadb {
namespace {

constexpr unsigned duplicate_key = 1062;  // ER_DUP_ENTRY

// Expired means expires_at <= now, the same test everywhere: a row is either
// live (and untouchable but by its token) or absent. A live tombstone keeps an
// absent or expired key from being reserved.
constexpr const char* columns =
    "key_hash, namespace, fingerprint, token, state, payload, expires_at, updated_at, scope_id";

// A row is locked by the statement that would insert it, whatever it finds:
// ON DUPLICATE KEY UPDATE takes the existing row's lock and changes nothing,
// so the read after it sees the latest committed row, and holds it.
const std::string reserve_sql =
    std::string("INSERT INTO idem_records (") + columns +
    ") SELECT :k, :ns, :fp, :token, 0, NULL, :expires, :now, :scope FROM DUAL WHERE NOT EXISTS "
    "(SELECT 1 FROM idem_tombstones WHERE key_hash = :k2 AND forget_at > :now2) "
    "ON DUPLICATE KEY UPDATE key_hash = key_hash";
const std::string insert_sql = std::string("INSERT INTO idem_records (") + columns +
                               ") VALUES (:k, :ns, :fp, :token, :state, :payload, :expires, :now, :scope)";
constexpr const char* take_sql =
    "UPDATE idem_records SET namespace = :ns, fingerprint = :fp, token = :token, state = :state, payload = :payload, "
    "expires_at = :expires, updated_at = :now, scope_id = :scope WHERE key_hash = :k";
constexpr const char* row_sql =
    "SELECT state, token, fingerprint, payload, expires_at FROM idem_records WHERE key_hash = :k";
constexpr const char* remember_sql =
    "INSERT INTO idem_tombstones (key_hash, fingerprint, forget_at) VALUES (:k, :fp, :at) "
    "ON DUPLICATE KEY UPDATE fingerprint = VALUES(fingerprint), forget_at = VALUES(forget_at)";
constexpr const char* remembered_sql =
    "SELECT fingerprint FROM idem_tombstones WHERE key_hash = :k AND forget_at > :now";
// The one-statement form's lookup: the row and the key's live tombstone in one
// round trip (a fresh key has neither, and would otherwise cost a second read).
// The one-row table on the left answers even when the key has no row.
// Sent natively, its values inlined, so that a held-back START TRANSACTION can
// go out ahead of it (mariadb_pipeline.hpp).
std::string look_up_sql(const std::string& k, std::int64_t now) {
    const std::string key = hex_literal(k);
    return "SELECT r.state, r.token, r.fingerprint, r.payload, r.expires_at, t.fingerprint "
           "FROM (SELECT 1) AS answer "
           "LEFT JOIN idem_records r ON r.key_hash = " +
           key + " LEFT JOIN idem_tombstones t ON t.key_hash = " + key + " AND t.forget_at > " + std::to_string(now);
}

std::string bytes(std::span<const std::byte> b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::string lost_race(const record_key& key) {
    return "idem: a concurrent transaction committed the record " + key.key_hash() + " first";
}

[[noreturn]] void corrupt(const record_key& key, const char* why) {
    throw store_error(store_failure::corrupt_record, "idem: the record " + key.key_hash() + " is corrupt: " + why);
}

// One record row as the statements read it.
struct row {
    int state = 0;
    std::string token, fingerprint, payload;
    long long expires_at = 0;
    soci::indicator payload_null = soci::i_null;

    [[nodiscard]] bool live(std::int64_t now) const { return expires_at > now; }

    // The answer a live row gives a call with `fingerprint`.
    [[nodiscard]] reservation decide(const record_key& key, std::string_view fingerprint_in) const {
        if (state != 0 && state != 1) corrupt(key, "unknown state");
        if (token.empty()) corrupt(key, "missing token");
        if (fingerprint.empty()) corrupt(key, "missing fingerprint");
        if (state == 1 && payload_null != soci::i_ok) corrupt(key, "completed without a payload");
        if (fingerprint != fingerprint_in) return reservation::fingerprint_mismatch();
        if (state == 1) return reservation::completed(payload);
        return reservation::in_flight();
    }
};

// The key's row, held until COMMIT when `lock`; nullopt when there is none.
std::optional<row> read_row(soci::session& sql, const record_key& key, bool lock) {
    row r;
    const std::string k = bytes(record_id(key.digest()));
    soci::indicator token_null = soci::i_ok, fingerprint_null = soci::i_ok;
    sql << std::string(row_sql) + (lock ? " FOR UPDATE" : ""), soci::use(k, "k"), soci::into(r.state),
        soci::into(r.token, token_null), soci::into(r.fingerprint, fingerprint_null),
        soci::into(r.payload, r.payload_null), soci::into(r.expires_at);
    if (!sql.got_data()) return std::nullopt;
    if (token_null != soci::i_ok) r.token.clear();
    if (fingerprint_null != soci::i_ok) r.fingerprint.clear();
    return r;
}

// What a live tombstone whose fingerprint digest is `stored` answers: expired, or fingerprint_mismatch.
reservation tombstone_answer(const record_key& key, const std::string& stored, std::string_view fingerprint) {
    if (stored.size() != fingerprint_digest_bytes) corrupt(key, "its tombstone's fingerprint is malformed");
    if (stored != fingerprint_digest(fingerprint)) return reservation::fingerprint_mismatch();
    return reservation::expired();
}

// The answer of `key`'s live tombstone (expired or fingerprint_mismatch); nullopt when none.
std::optional<reservation> remembered(soci::session& sql, const record_key& key, std::string_view fingerprint,
                                      std::int64_t now) {
    const std::string k = bytes(record_id(key.digest()));
    std::string stored;
    long long at = now;
    sql << remembered_sql, soci::use(k, "k"), soci::use(at, "now"), soci::into(stored);
    if (!sql.got_data()) return std::nullopt;
    return tombstone_answer(key, stored, fingerprint);
}

void remember(soci::session& sql, const record_key& key, std::string_view fingerprint, std::int64_t forget_at) {
    const std::string k = bytes(record_id(key.digest())), digest = fingerprint_digest(fingerprint);
    long long at = forget_at;
    sql << remember_sql, soci::use(k, "k"), soci::use(digest, "fp"), soci::use(at, "at");
}

// A statement above the server's max_allowed_packet is refused, and the
// server drops the connection with it: the client reads 1153, or only that the
// server went away, a lost connection the unit of work would run again. So a
// large result is measured against the limit before it is sent, and refused
// as a clear constraint error on a session that stays. SOCI sends it as
// escaped text: \0 \n \r \\ ' " and \x1a take two bytes each.
void check_packet(soci::session& sql, std::string_view payload) {
    constexpr std::size_t smaller_than_any_server_default = 64 * 1024, rest_of_statement = 4096;
    if (payload.size() < smaller_than_any_server_default) return;
    long long limit = 0;
    sql << "SELECT @@max_allowed_packet", soci::into(limit);
    const auto escaped = std::count_if(payload.begin(), payload.end(), [](char c) {
        return c == '\0' || c == '\n' || c == '\r' || c == '\\' || c == '\'' || c == '"' || c == '\x1a';
    });
    const std::size_t sent = payload.size() + static_cast<std::size_t>(escaped) + rest_of_statement;
    if (limit > 0 && sent > static_cast<std::size_t>(limit))
        throw store_error(store_failure::constraint,
                          "idem: a result of " + std::to_string(payload.size()) + " bytes (" + std::to_string(sent) +
                              " as sent) is larger than the server's max_allowed_packet (" + std::to_string(limit) +
                              "): raise it, or store less",
                          "1153");
}

// What every statement writing a row binds: the key's identity and the row's values.
struct written {
    std::string k, ns, fp, token, payload;
    mutable soci::indicator payload_null = soci::i_null;  // SOCI binds indicators as writable
    int state = 0;
    long long expires = 0, now = 0;
    std::string scope;

    written(const record_key& key, std::string_view fingerprint, std::string_view token_in, int state_in,
            std::optional<std::string_view> payload_in, record_times t)
        : k(bytes(record_id(key.digest()))),
          ns(key.name_space()),
          fp(fingerprint),
          token(token_in),
          payload(payload_in.value_or("")),
          payload_null(payload_in ? soci::i_ok : soci::i_null),
          state(state_in),
          expires(t.expires_at),
          now(t.now),
          scope(bytes(scope_id(key.owner()))) {}

    // Inserts the row; a row with its key already there fails (1062).
    void insert(soci::session& sql) const {
        check_packet(sql, payload);
        sql << insert_sql, soci::use(k, "k"), soci::use(ns, "ns"), soci::use(fp, "fp"), soci::use(token, "token"),
            soci::use(state, "state"), soci::use(payload, payload_null, "payload"), soci::use(expires, "expires"),
            soci::use(now, "now"), soci::use(scope, "scope");
    }

    // Rewrites the row in place (a takeover, or a completion).
    void take(soci::session& sql) const {
        check_packet(sql, payload);
        sql << take_sql, soci::use(ns, "ns"), soci::use(fp, "fp"), soci::use(token, "token"), soci::use(state, "state"),
            soci::use(payload, payload_null, "payload"), soci::use(expires, "expires"), soci::use(now, "now"),
            soci::use(scope, "scope"), soci::use(k, "k");
    }
};

time_point at(std::int64_t milliseconds) {
    return saturating_time(std::chrono::milliseconds(milliseconds));
}

// The record_state of a row read as state, updated_at, expires_at, LENGTH(payload) (NULL in flight).
record_state state_of(int state, long long updated_at, long long expires_at, long long payload_bytes,
                      soci::indicator payload_null, std::span<const std::byte> id, std::int64_t now) {
    if ((state != 0 && state != 1) || (state == 1 && payload_null != soci::i_ok))
        throw store_error(store_failure::corrupt_record, "idem: the record " + hex(id.first(8)) +
                                                             " is corrupt: it does not have the shape idem writes");
    record_state r;
    r.completed = state == 1;
    r.created_at = at(updated_at);
    r.expires_at = at(expires_at);
    r.now = at(now);
    r.payload_bytes = payload_null == soci::i_ok ? static_cast<std::size_t>(payload_bytes) : 0;
    return r;
}

// The rows of a listing: key_hash, state, updated_at, expires_at, LENGTH(payload).
std::vector<listed_record> listed(soci::statement& st, const std::string& hash, const int& state,
                                  const long long& updated, const long long& expires, const long long& size,
                                  const soci::indicator& size_null, std::string_view name_space, std::int64_t now) {
    std::vector<listed_record> out;
    st.execute();
    while (st.fetch()) {
        if (hash.size() != record_id_bytes)
            throw store_error(store_failure::corrupt_record,
                              "idem: a record of this namespace is corrupt: its key_hash is not 16 bytes");
        listed_record l;
        std::memcpy(l.key_hash.data(), hash.data(), record_id_bytes);
        l.state = state_of(state, updated, expires, size, size_null, l.key_hash, now);
        l.state.name_space = std::string(name_space);
        out.push_back(std::move(l));
    }
    return out;
}

}  // namespace

reservation try_reserve(soci::session& sql, const record_key& key, std::string_view fingerprint, std::string_view token,
                        record_times t) {
    const written w(key, fingerprint, token, 0, std::nullopt, t);
    sql << reserve_sql, soci::use(w.k, "k"), soci::use(w.ns, "ns"), soci::use(w.fp, "fp"), soci::use(w.token, "token"),
        soci::use(w.expires, "expires"), soci::use(w.now, "now"), soci::use(w.scope, "scope"), soci::use(w.k, "k2"),
        soci::use(w.now, "now2");
    std::optional<row> found = read_row(sql, key, true);
    if (found && found->token == token && found->state == 0) return reservation::reserved(std::string(token));
    if (found && found->live(t.now)) return found->decide(key, fingerprint);
    // Absent (a tombstone stopped the insert) or expired: a live tombstone answers.
    if (auto answer = remembered(sql, key, fingerprint, t.now)) return std::move(*answer);
    if (!found) corrupt(key, "it vanished between two statements of one transaction");
    w.take(sql);  // expired, and locked: this reservation takes it over
    return reservation::reserved(std::string(token));
}

bool complete(soci::session& sql, const record_key& key, std::string_view token, std::string_view fingerprint,
              std::string_view payload, record_times t, std::optional<std::int64_t> forget_at) {
    const written w(key, fingerprint, token, 1, payload, t);
    std::optional<row> found = read_row(sql, key, true);
    if (!found) {
        // Absent (purged, or released): inserted completed, unless a concurrent
        // writer inserts it first; then judged as that writer left it.
        try {
            w.insert(sql);
        } catch (const soci::mysql_soci_error& e) {
            if (e.err_num_ != duplicate_key) throw;
            found = read_row(sql, key, true);
            if (!found) throw;
        }
    }
    if (found) {
        // A live entry with another token, or a completed one, stays as it is.
        if (found->live(t.now) && !(found->state == 0 && found->token == token)) return false;
        w.take(sql);
    }
    if (forget_at) remember(sql, key, fingerprint, *forget_at);
    return true;
}

bool release(soci::session& sql, const record_key& key, std::string_view token, std::int64_t now) {
    const std::string k = bytes(record_id(key.digest())), t(token);
    long long at_ms = now;
    soci::statement st = unnamed_statement(
        sql, "DELETE FROM idem_records WHERE key_hash = :k AND token = :token AND state = 0 AND expires_at > :now",
        soci::use(k, "k"), soci::use(t, "token"), soci::use(at_ms, "now"));
    st.execute(true);
    return st.get_affected_rows() == 1;
}

record_lookup look_up(soci::session& sql, const record_key& key, std::string_view fingerprint, std::int64_t now,
                      const char* begin) {
    const std::string select = look_up_sql(bytes(record_id(key.digest())), now);
    // A START TRANSACTION that failed fails the read: the read ran outside a
    // transaction, and its answer is dropped.
    pipeline p(native_handle(sql), begin != nullptr ? std::initializer_list<std::string_view>{begin, select}
                                                    : std::initializer_list<std::string_view>{select});
    if (begin != nullptr) {
        if (p.error() != 0) raise(p.error(), p.message(), "START TRANSACTION");
        p.next();
    }
    if (p.error() != 0) raise(p.error(), p.message(), "reading a record");
    const MYSQL_ROW values = p.rows() != nullptr ? mysql_fetch_row(p.rows()) : nullptr;
    if (values == nullptr) throw store_error(store_failure::other, "idem: reading a record returned no row");
    const unsigned long* lengths = mysql_fetch_lengths(p.rows());
    const auto text = [&](int i) { return std::string(values[i], lengths[i]); };
    const auto number = [&](int i, auto& out) {
        if (std::from_chars(values[i], values[i] + lengths[i], out).ec != std::errc())
            corrupt(key, "a number is not one");
    };
    const bool found = values[0] != nullptr;
    if (found) {
        row r;
        number(0, r.state);
        if (values[1] != nullptr) r.token = text(1);
        if (values[2] != nullptr) r.fingerprint = text(2);
        if (values[3] != nullptr) {
            r.payload = text(3);
            r.payload_null = soci::i_ok;
        }
        if (values[4] != nullptr) number(4, r.expires_at);
        if (r.live(now)) {
            reservation answer = r.decide(key, fingerprint);
            if (answer.status == reservation_status::in_flight) return {record_lookup::found::reserve, {}};
            return {record_lookup::found::answer, std::move(answer)};
        }
    }
    // Absent or expired: a live tombstone answers.
    if (values[5] != nullptr) return {record_lookup::found::answer, tombstone_answer(key, text(5), fingerprint)};
    // Absent: the work may run; expired: to take over.
    return {found ? record_lookup::found::reserve : record_lookup::found::nothing, {}};
}

void insert(soci::session& sql, const record_key& key, std::string_view fingerprint, std::string_view token,
            std::optional<std::string_view> payload, record_times t, std::optional<std::int64_t> forget_at) {
    const written w(key, fingerprint, token, payload ? 1 : 0, payload, t);
    try {
        w.insert(sql);
    } catch (const soci::mysql_soci_error& e) {
        if (e.err_num_ != duplicate_key) throw;
        throw store_error(store_failure::lost_race, lost_race(key), "1062");
    }
    if (forget_at) remember(sql, key, fingerprint, *forget_at);
}

std::unique_ptr<deferred_write> insert_at_commit(const record_key& key, std::string_view fingerprint,
                                                 std::string_view token, std::optional<std::string_view> payload,
                                                 record_times t, std::optional<std::int64_t> forget_at) {
    if (payload && payload->size() >= deferred_payload_limit)
        throw std::logic_error("idem: a result this large is inserted the ordinary way");
    const written w(key, fingerprint, token, payload ? 1 : 0, payload, t);
    const std::string k = hex_literal(w.k);
    auto out = std::make_unique<deferred_write>();
    out->what = "inserting a record";
    out->lost_race = lost_race(key);
    out->statements.push_back(std::string("INSERT INTO idem_records (") + columns + ") VALUES (" + k + ", " +
                              hex_literal(w.ns) + ", " + hex_literal(w.fp) + ", " + hex_literal(w.token) + ", " +
                              std::to_string(w.state) + ", " + (payload ? hex_literal(w.payload) : "NULL") + ", " +
                              std::to_string(w.expires) + ", " + std::to_string(w.now) + ", " + hex_literal(w.scope) +
                              ")");
    if (forget_at)
        out->statements.push_back("INSERT INTO idem_tombstones (key_hash, fingerprint, forget_at) VALUES (" + k + ", " +
                                  hex_literal(fingerprint_digest(fingerprint)) + ", " + std::to_string(*forget_at) +
                                  ") ON DUPLICATE KEY UPDATE fingerprint = VALUES(fingerprint), "
                                  "forget_at = VALUES(forget_at)");
    return out;
}

std::size_t purge(soci::session& sql, std::int64_t cutoff, std::size_t limit) {
    const auto rows = [&](const char* text, std::size_t at_most) {
        long long c = cutoff, n = static_cast<long long>(std::min<std::size_t>(at_most, 1'000'000'000));
        soci::statement st = unnamed_statement(sql, text, soci::use(c, "cutoff"), soci::use(n, "n"));
        st.execute(true);
        return static_cast<std::size_t>(st.get_affected_rows());
    };
    // The rows are picked in a derived table (LIMIT is refused in an IN
    // subquery), then joined by primary key: an IN over the derived table
    // would scan the whole table, and wait on rows others hold.
    std::size_t deleted = rows(
        "DELETE r FROM (SELECT key_hash FROM idem_records FORCE INDEX (idem_records_expires_at) "
        "WHERE expires_at <= :cutoff ORDER BY expires_at LIMIT :n FOR UPDATE SKIP LOCKED) x "
        "STRAIGHT_JOIN idem_records r ON r.key_hash = x.key_hash",
        limit);
    // Then the tombstones whose window ended, within the same bound.
    if (deleted < limit)
        deleted += rows(
            "DELETE t FROM (SELECT key_hash FROM idem_tombstones FORCE INDEX (idem_tombstones_forget_at) "
            "WHERE forget_at <= :cutoff ORDER BY forget_at LIMIT :n FOR UPDATE SKIP LOCKED) x "
            "STRAIGHT_JOIN idem_tombstones t ON t.key_hash = x.key_hash",
            limit - deleted);
    return deleted;
}

std::optional<record_state> inspect(soci::session& sql, const record_id_type& id, bool with_payload, std::int64_t now) {
    const std::string k = bytes(id);
    int state = 0, with = with_payload ? 1 : 0;
    long long updated = 0, expires = 0, size = 0;
    soci::indicator size_null = soci::i_null, payload_null = soci::i_null;
    std::string name_space, payload;
    sql << "SELECT state, updated_at, expires_at, LENGTH(payload), namespace, CASE WHEN :with = 1 THEN payload END "
           "FROM idem_records WHERE key_hash = :k",
        soci::use(with, "with"), soci::use(k, "k"), soci::into(state), soci::into(updated), soci::into(expires),
        soci::into(size, size_null), soci::into(name_space), soci::into(payload, payload_null);
    if (!sql.got_data()) return std::nullopt;
    record_state r = state_of(state, updated, expires, size, size_null, id, now);
    r.name_space = name_space;
    if (payload_null == soci::i_ok) r.payload = payload;
    return r;
}

std::vector<listed_record> recent(soci::session& sql, std::string_view name_space, std::size_t limit,
                                  std::int64_t now) {
    const std::string ns(name_space);
    long long n = static_cast<long long>(limit), updated = 0, expires = 0, size = 0;
    int state = 0;
    std::string hash;
    soci::indicator size_null = soci::i_null;
    soci::statement st = unnamed_statement(
        sql,
        "SELECT key_hash, state, updated_at, expires_at, LENGTH(payload) FROM idem_records WHERE namespace = :ns "
        "ORDER BY updated_at DESC, key_hash LIMIT :n",
        soci::use(ns, "ns"), soci::use(n, "n"), soci::into(hash), soci::into(state), soci::into(updated),
        soci::into(expires), soci::into(size, size_null));
    return listed(st, hash, state, updated, expires, size, size_null, name_space, now);
}

std::vector<listed_record> completed_since(soci::session& sql, std::string_view name_space,
                                           const std::optional<scope_id_type>& owner, std::int64_t since,
                                           std::size_t limit, std::int64_t now) {
    const std::string ns(name_space), scope = owner ? bytes(*owner) : std::string();
    long long n = static_cast<long long>(limit), from = since, from2 = since, updated = 0, expires = 0, size = 0;
    int state = 0, any = owner ? 0 : 1;
    std::string hash;
    soci::indicator size_null = soci::i_null;
    // A record completed at or after `since` expires after it (a retention is
    // at least a millisecond): the expires_at index finds those rows.
    soci::statement st = unnamed_statement(
        sql,
        "SELECT key_hash, state, updated_at, expires_at, LENGTH(payload) FROM idem_records WHERE expires_at > :from "
        "AND namespace = :ns AND state = 1 AND updated_at >= :from2 AND (:any = 1 OR scope_id = :scope) "
        "ORDER BY updated_at DESC, key_hash LIMIT :n",
        soci::use(from, "from"), soci::use(ns, "ns"), soci::use(from2, "from2"), soci::use(any, "any"),
        soci::use(scope, "scope"), soci::use(n, "n"), soci::into(hash), soci::into(state), soci::into(updated),
        soci::into(expires), soci::into(size, size_null));
    return listed(st, hash, state, updated, expires, size, size_null, name_space, now);
}

forget_result forget(soci::session& sql, const record_id_type& id, bool force, std::int64_t now) {
    const std::string k = bytes(id);
    {
        int locked = 0;  // the row held until COMMIT before it is judged
        sql << "SELECT state FROM idem_records WHERE key_hash = :k FOR UPDATE", soci::use(k, "k"), soci::into(locked);
    }
    std::optional<record_state> found = inspect(sql, id, false, now);
    if (found && !found->completed && !found->expired() && !force) return {forget_outcome::refused_in_flight, *found};
    if (found) sql << "DELETE FROM idem_records WHERE key_hash = :k", soci::use(k, "k");
    long long forget_at = 0;
    soci::indicator none = soci::i_null;
    sql << "DELETE FROM idem_tombstones WHERE key_hash = :k RETURNING forget_at", soci::use(k, "k"),
        soci::into(forget_at, none);
    const bool tombstone = sql.got_data() && none == soci::i_ok;
    if (found) return {forget_outcome::deleted, *found, tombstone};
    if (!tombstone) return {forget_outcome::not_found, {}};
    record_state kept;
    kept.completed = true;
    kept.expires_at = at(forget_at);
    kept.now = at(now);
    return {forget_outcome::tombstone_deleted, kept, true};
}

std::size_t count_expired(soci::session& sql, std::int64_t cutoff) {
    long long n = 0, c = cutoff, c2 = cutoff;
    sql << "SELECT (SELECT COUNT(*) FROM idem_records WHERE expires_at <= :c) + "
           "(SELECT COUNT(*) FROM idem_tombstones WHERE forget_at <= :c2)",
        soci::use(c, "c"), soci::use(c2, "c2"), soci::into(n);
    return static_cast<std::size_t>(n);
}

rewrite_progress rewrite_payloads(soci::session& sql, const std::optional<record_id_type>& after, std::size_t limit,
                                  const payload_rewrite& rewrite) {
    struct stored {
        record_id_type key_hash;
        std::string payload;
    };
    std::vector<stored> rows;
    {
        // Through the primary key, in key-hash order: an empty string sorts before every key hash.
        const std::string from = after ? bytes(*after) : std::string();
        long long n = static_cast<long long>(limit);
        std::string hash, payload;
        soci::statement st = unnamed_statement(
            sql,
            "SELECT key_hash, payload FROM idem_records WHERE key_hash > :after AND state = 1 ORDER BY key_hash "
            "LIMIT :n",
            soci::use(from, "after"), soci::use(n, "n"), soci::into(hash), soci::into(payload));
        st.execute();
        while (st.fetch()) {
            if (hash.size() != record_id_bytes)
                throw store_error(store_failure::corrupt_record,
                                  "idem: a completed record is corrupt: it does not have the shape idem writes");
            stored r;
            std::memcpy(r.key_hash.data(), hash.data(), record_id_bytes);
            r.payload = payload;
            rows.push_back(std::move(r));
        }
    }
    rewrite_progress progress;
    progress.read = rows.size();
    for (const stored& r : rows) {
        const std::optional<std::string> replacement = rewrite({.key_hash = r.key_hash, .payload = r.payload});
        if (!replacement) continue;
        // Only over the payload just read: a row written anew meanwhile keeps its own.
        const std::string k = bytes(r.key_hash);
        soci::statement st = unnamed_statement(
            sql, "UPDATE idem_records SET payload = :new WHERE key_hash = :k AND state = 1 AND payload = :old",
            soci::use(*replacement, "new"), soci::use(k, "k"), soci::use(r.payload, "old"));
        st.execute(true);
        progress.rewritten += static_cast<std::size_t>(st.get_affected_rows());
    }
    if (rows.size() == limit) progress.next = rows.back().key_hash;
    return progress;
}

}  // namespace idem::detail::mariadb
