#include "sql/outbox_table.hpp"

#include <soci/soci.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "idem/error.hpp"
#include "idem/unit_of_work.hpp"
#include "internal/crypto.hpp"
#include "internal/text.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/sql_transaction.hpp"
#include "sql/unnamed_statement.hpp"

namespace idem::detail::outbox_table {
namespace {

// Headers in one bytes column: "<length>:<name><length>:<value>" for each, in order.
std::string encode_headers(const std::vector<message_header>& headers) {
    std::string out;
    for (const message_header& h : headers)
        for (const std::string* part : {&h.name, &h.value}) append_length_prefixed(out, *part);
    return out;
}

[[noreturn]] void corrupt() {
    throw store_error(store_failure::corrupt_record, "idem: an outbox row's headers are not in the form idem writes");
}

std::vector<message_header> decode_headers(std::string_view text) {
    std::vector<message_header> headers;
    auto next_part = [&]() {
        std::size_t length = 0;
        const auto colon = text.find(':');
        if (colon == std::string_view::npos) corrupt();
        const auto [end, ec] = std::from_chars(text.data(), text.data() + colon, length);
        if (ec != std::errc() || end != text.data() + colon || length > text.size() - colon - 1) corrupt();
        std::string part(text.substr(colon + 1, length));
        text.remove_prefix(colon + 1 + length);
        return part;
    };
    while (!text.empty()) {
        message_header h;
        h.name = next_part();
        if (text.empty()) corrupt();
        h.value = next_part();
        headers.push_back(std::move(h));
    }
    return headers;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string unhex(std::string_view text) {
    if (text.size() % 2 != 0) corrupt();
    std::string out(text.size() / 2, '\0');
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int high = hex_digit(text[2 * i]), low = hex_digit(text[2 * i + 1]);
        if (high < 0 || low < 0) corrupt();
        out[i] = static_cast<char>(high * 16 + low);
    }
    return out;
}

// How bytes travel through SOCI on this dialect: as they are, or as hex text.
struct bytes_codec {
    bool hex;

    explicit bytes_codec(unit_of_work& uow) : hex(uow.internals().dialect().bytes_as_hex()) {}

    [[nodiscard]] std::string to_sql(std::string_view bytes) const {
        return hex ? detail::hex(std::as_bytes(std::span(bytes.data(), bytes.size()))) : std::string(bytes);
    }
    [[nodiscard]] std::string from_sql(std::string text) const { return hex ? unhex(text) : std::move(text); }
};

// What the table keeps of a sink's answer: at most 1 KiB of valid UTF-8
// without NUL (the column is text; an answer may be any bytes).
std::string kept_answer(std::string_view answer) {
    std::string kept(answer.substr(0, 1024));
    const bool valid = is_valid_utf8(kept);
    for (char& c : kept)
        if (c == '\0' || (!valid && static_cast<unsigned char>(c) >= 0x80)) c = '?';
    return kept;
}

// The size of the vectors a statement reads up to `limit` rows into (its
// LIMIT): one more, since SOCI filled vectors of one element with no row at
// all (a claim of one message took none).
std::size_t vector_room(std::size_t limit) {
    return limit + 1;
}

const outbox_statements& statements(unit_of_work& uow) {
    return uow.internals().dialect().outbox();
}

// First in a transaction of the relay's: how the dialect plans and commits queue work.
void apply_queue_settings(unit_of_work& uow) {
    if (const std::string& settings = statements(uow).queue_settings; !settings.empty()) uow.sql() << settings;
}

}  // namespace

std::int64_t now_ms() noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

namespace {

// The INSERT of publish, into the intake (see take_in), prepared once per
// connection (where statements may be kept), its parameters bound to the members.
struct insert_statement {
    std::string id, topic, key, headers, payload;
    soci::indicator key_null = soci::i_null;
    long long at = 0;
    soci::statement st;

    insert_statement(soci::session& sql, const std::string& text, bool kept) : st(sql) {
        st.exchange(soci::use(id, "id"));
        st.exchange(soci::use(topic, "topic"));
        st.exchange(soci::use(key, key_null, "ordering_key"));
        st.exchange(soci::use(headers, "headers"));
        st.exchange(soci::use(payload, "payload"));
        st.exchange(soci::use(at, "created"));
        prepare_statement(st, text, kept);
    }
};

// Beyond this many messages a transaction's INSERTs go out as it publishes
// them: the pipeline that ends it reads no answer before it has sent them all.
constexpr std::size_t max_messages_at_commit = 16;

}  // namespace

void insert(unit_of_work& uow, std::span<const new_row> rows, std::int64_t now) {
    if (rows.empty()) return;
    sql_transaction& tx = uow.internals();
    const outbox_statements& text = statements(uow);
    // In db.once on a fast path (PostgreSQL's), the messages travel with the
    // record's own statement and COMMIT: publishing costs no round trip of its own.
    if (tx.may_defer() && !text.insert_at_commit.empty() && rows.size() <= max_messages_at_commit) {
        for (const new_row& row : rows) {
            std::vector<deferred_sql::value> values;
            values.reserve(6);
            values.emplace_back(row.id);
            values.emplace_back(row.message.topic);
            if (row.message.ordering_key)
                values.emplace_back(*row.message.ordering_key);
            else
                values.emplace_back(std::monostate{});
            values.emplace_back(encode_headers(row.message.headers));
            values.emplace_back(row.message.payload);
            values.emplace_back(now);
            tx.defer(std::make_unique<deferred_sql>(text.insert_at_commit.c_str(), "publishing a message",
                                                    tx.keeps_statements(), std::move(values)));
        }
        return;
    }
    static const std::uint64_t owner = new_connection_cache_owner();
    const bytes_codec bytes(uow);
    soci::session& sql = uow.sql();
    std::unique_ptr<insert_statement> once;
    insert_statement* statement = nullptr;
    if (tx.keeps_statements()) {
        std::shared_ptr<void>& slot = tx.connection_cache(owner);
        if (!slot) slot = std::make_shared<insert_statement>(sql, text.insert, true);
        statement = static_cast<insert_statement*>(slot.get());
    } else {
        once = std::make_unique<insert_statement>(sql, text.insert, false);
        statement = once.get();
    }
    insert_statement& s = *statement;
    s.at = now;
    for (const new_row& row : rows) {
        s.id = row.id;
        s.topic = row.message.topic;
        s.key = row.message.ordering_key.value_or(std::string());
        s.key_null = row.message.ordering_key ? soci::i_ok : soci::i_null;
        s.headers = bytes.to_sql(encode_headers(row.message.headers));
        s.payload = bytes.to_sql(row.message.payload);
        execute_kept(s.st);
    }
}

namespace {

// The first `limit` due messages, in the order they came due, that no
// earlier undelivered message of their key (pending, claimed, backing off or
// dead) holds back, taken for `token` until `until`. Read through the due
// index, skipping what other relays hold locked, the scan stops as soon as it
// has them; it never reads what is claimed, backing off or set aside. Rows
// are then updated by id, found through the primary key: a statement that
// names no state can be read through no partial index, whatever the
// statistics say (the rows were locked in the state the scan read).
std::vector<claimed_row> take_free(unit_of_work& uow, const bytes_codec& bytes, std::size_t limit, long long now,
                                   long long until, const std::string& token) {
    const outbox_statements& s = statements(uow);
    const std::size_t room = vector_room(limit);
    std::vector<long long> seq(room), created(room);
    std::vector<std::string> id(room), topic(room), key(room), headers(room), payload(room);
    std::vector<soci::indicator> key_null(room);
    std::vector<int> attempts(room);
    long long n = static_cast<long long>(limit);
    soci::statement take(uow.sql());
    if (s.mark_taken.empty()) {
        take.exchange(soci::use(until, "until"));
        take.exchange(soci::use(token, "token"));
    }
    take.exchange(soci::use(now, "now"));
    take.exchange(soci::use(n, "n"));
    take.exchange(soci::into(seq));
    take.exchange(soci::into(id));
    take.exchange(soci::into(topic));
    take.exchange(soci::into(key, key_null));
    take.exchange(soci::into(headers));
    take.exchange(soci::into(payload));
    take.exchange(soci::into(attempts));
    take.exchange(soci::into(created));
    prepare_statement(take, s.take_free);
    take.execute(true);
    if (!s.mark_taken.empty() && !id.empty()) {
        std::string each;
        soci::statement mark = unnamed_statement(uow.sql(), s.mark_taken, soci::use(until, "until"),
                                                 soci::use(token, "token"), soci::use(each, "id"));
        for (const std::string& taken : id) {
            each = taken;
            mark.execute(true);
        }
    }
    std::vector<claimed_row> rows;
    rows.reserve(seq.size());
    for (std::size_t i = 0; i < seq.size(); ++i) {
        claimed_row r;
        r.seq = seq[i];
        r.id = std::move(id[i]);
        r.topic = std::move(topic[i]);
        if (key_null[i] == soci::i_ok) r.ordering_key = std::move(key[i]);
        r.headers = decode_headers(bytes.from_sql(std::move(headers[i])));
        r.payload = bytes.from_sql(std::move(payload[i]));
        r.attempt = attempts[i];
        r.created_at = created[i];
        rows.push_back(std::move(r));
    }
    return rows;
}

// Messages that will go on waiting for an earlier message of their key are
// set aside until `until`, so that claims no longer read past them: those
// whose key's first undelivered message is dead or backing off, and those
// with 64 messages or more before them (a key's long queue). Among the first
// 16 batches of due messages, one window a time. settle() makes the next
// message of a key due as soon as the one before is delivered, and the
// lease's end is the latest they are looked at again. One right behind a
// message in flight is never set aside (it is free as soon as that one is
// delivered), nor one whose predecessor another transaction holds; the
// predecessor is held for share meanwhile, so a settle that delivers it waits
// for this transaction, then sees what it set aside. Returns how many.
std::size_t set_aside_waiting(unit_of_work& uow, std::size_t limit, long long now, long long until) {
    long long window = static_cast<long long>(limit) * 16, stalled_at = now, in_flight_at = now;
    soci::statement st = unnamed_statement(
        uow.sql(), statements(uow).set_aside, soci::use(until, "until"), soci::use(now, "now"),
        soci::use(window, "window"), soci::use(stalled_at, "stalled_at"), soci::use(in_flight_at, "in_flight_at"));
    st.execute(true);
    return static_cast<std::size_t>(st.get_affected_rows());
}

// Moves up to `limit` messages from the intake into the outbox, in the order
// they were published, each taking its seq there as it comes in (above every
// row already in): those of a key come in after every earlier one of it, and
// before any later. Publish writes the intake, a table in publication order
// with no other index (SQLite's rowid, PostgreSQL's key on seq): one row,
// where a row in the outbox would be four writes (its row, its id's, due and
// ordering key's index entries, two of them at random places), each a page
// more in SQLite's WAL, an index insertion and its WAL on PostgreSQL, in the
// business transaction. Here they are the relay's, a batch at a time. When
// fewer come in than were taken (an id arrived again: the unique index on id
// turned it away), nothing is dropped: id_arrived_again rolls the claim back
// and take_in_one_by_one looks at each.
void take_in(unit_of_work& uow, std::size_t limit) {
    const outbox_statements& s = statements(uow);
    soci::session& sql = uow.sql();
    long long n = static_cast<long long>(limit), taken = 0, came_in = 0;
    if (!s.intake_lock.empty()) {
        int may = 0;
        sql << s.intake_lock, soci::into(may);
        if (may == 0) return;  // another claim is taking in; this one claims what is in
    }
    if (!s.take_in.empty()) {
        // One statement: what leaves the intake is what comes in, rows committed
        // since it began (an earlier seq's transaction ending late) stay for the next.
        sql << s.take_in, soci::use(n, "n"), soci::into(taken), soci::into(came_in);
        if (came_in != taken) throw id_arrived_again();
        return;
    }
    // Three statements that see the same rows (writers serialised, or the rows locked).
    long long last = 0;
    soci::indicator none = soci::i_null;
    sql << s.intake_range, soci::use(n, "n"), soci::into(last, none), soci::into(taken);
    if (none != soci::i_ok) return;
    soci::statement copy = unnamed_statement(sql, s.intake_copy, soci::use(last, "last"));
    copy.execute(true);
    came_in = copy.get_affected_rows();
    if (came_in != taken) throw id_arrived_again();
    sql << s.intake_remove, soci::use(last, "last");
}

// A message of the intake as it was published.
struct intake_row {
    long long seq = 0;
    long long created_at = 0;
    std::string id, topic, key, headers, payload;  // headers and payload as SQL has them (see bytes_codec)
    soci::indicator key_null = soci::i_null;

    [[nodiscard]] bool same_message(const intake_row& other) const {
        return topic == other.topic && key_null == other.key_null && (key_null != soci::i_ok || key == other.key) &&
               headers == other.headers && payload == other.payload;
    }
};

}  // namespace

id_arrived_again::id_arrived_again() : std::runtime_error("idem: a message id arrived again in the outbox's intake") {}

id_arrived_again::~id_arrived_again() = default;

intake_report take_in_one_by_one(unit_of_work& uow, std::size_t limit) {
    apply_queue_settings(uow);
    soci::session& sql = uow.sql();
    const outbox_statements& s = statements(uow);
    intake_report report;
    if (!s.intake_lock.empty()) {
        int may = 0;
        sql << s.intake_lock, soci::into(may);
        if (may == 0) return report;  // another claim is taking in
    }
    std::vector<intake_row> rows;
    {
        intake_row r;
        long long n = static_cast<long long>(limit);
        soci::statement st = unnamed_statement(sql, s.intake_rows, soci::use(n, "n"), soci::into(r.seq),
                                               soci::into(r.id), soci::into(r.topic), soci::into(r.key, r.key_null),
                                               soci::into(r.headers), soci::into(r.payload), soci::into(r.created_at));
        st.execute();
        while (st.fetch()) rows.push_back(r);
    }
    intake_row in, put;
    long long at = now_ms();
    int state = 0;
    soci::indicator done_null = soci::i_null;
    std::string answer;
    soci::indicator answer_null = soci::i_null;
    soci::statement find =
        unnamed_statement(sql, s.find_message, soci::use(put.id, "id"), soci::into(in.topic),
                          soci::into(in.key, in.key_null), soci::into(in.headers), soci::into(in.payload));
    // A message whose id is taken comes in dead, under an id of its own.
    soci::statement insert = unnamed_statement(
        sql, s.insert_message, soci::use(put.id, "id"), soci::use(put.topic, "topic"),
        soci::use(put.key, put.key_null, "ordering_key"), soci::use(put.headers, "headers"),
        soci::use(put.payload, "payload"), soci::use(put.created_at, "created"), soci::use(at, "available"),
        soci::use(state, "state"), soci::use(at, done_null, "done"), soci::use(answer, answer_null, "answer"));
    soci::statement remove = unnamed_statement(sql, s.remove_intake_row, soci::use(put.seq, "seq"));
    for (intake_row& row : rows) {
        put = std::move(row);
        in = {};
        find.execute(true);
        const bool taken = find.got_data();
        if (!taken) {
            at = put.created_at;
            state = 0;
            done_null = answer_null = soci::i_null;
            insert.execute(true);
        } else if (put.same_message(in)) {
            // The same message published twice under one id: one delivery serves both.
            report.duplicates.push_back({.id = put.id, .topic = put.topic, .kept_as = {}});
        } else {
            const std::string original = std::exchange(put.id, random_uuid());
            at = now_ms();
            state = 2;
            done_null = answer_null = soci::i_ok;
            answer = "idem: its id " + original +
                     " had been published before for another message; kept under a new id, requeue it to deliver";
            insert.execute(true);
            report.conflicts.push_back({.id = original, .topic = put.topic, .kept_as = put.id});
        }
        remove.execute(true);
    }
    return report;
}

std::vector<claimed_row> claim(unit_of_work& uow, std::size_t limit, std::int64_t now, std::int64_t lease_end,
                               const std::string& token) {
    apply_queue_settings(uow);
    // As many as the claim may read (see set_aside_waiting): other keys'
    // messages behind a key's long queue come in while it waits.
    take_in(uow, limit * 16);
    std::vector<claimed_row> rows = take_free(uow, bytes_codec(uow), limit, now, lease_end, token);
    // Less than a quarter of a batch: messages that wait may be what the
    // scan read most (a key's long queue, the messages behind a dead letter).
    if (rows.size() * 4 < limit) (void)set_aside_waiting(uow, limit, now, lease_end);
    // RETURNING comes in no promised order.
    std::sort(rows.begin(), rows.end(), [](const claimed_row& a, const claimed_row& b) { return a.seq < b.seq; });
    return rows;
}

void settle(unit_of_work& uow, const std::string& token, std::int64_t lease_end, std::span<const unsettled> failed,
            std::int64_t now, bool keyed) {
    apply_queue_settings(uow);
    const outbox_statements& s = statements(uow);
    soci::session& sql = uow.sql();
    if (!failed.empty()) {
        long long due = 0, done = now;
        int state = 0;
        soci::indicator done_null = soci::i_null;
        std::string id, answer;
        soci::statement st = unnamed_statement(sql, s.settle_one, soci::use(state, "state"), soci::use(due, "due"),
                                               soci::use(answer, "answer"), soci::use(done, done_null, "done"),
                                               soci::use(id, "id"), soci::use(token, "token"));
        for (const unsettled& f : failed) {
            id = f.id;
            state = f.kind == settle_kind::dead ? 2 : 0;
            done_null = f.kind == settle_kind::dead ? soci::i_ok : soci::i_null;
            due = f.available_at;
            answer = kept_answer(f.answer);
            st.execute(true);
        }
    }
    long long at = now, until = lease_end;
    // The rest of the claim: found through the due index by the lease's end,
    // which all its messages share, not by a scan for the token.
    sql << s.settle_rest, soci::use(at, "at"), soci::use(until, "until"), soci::use(token, "token");
    if (!keyed) return;
    // The next message of each key delivered now (found through the rows
    // delivered at this instant, and any other relay's of the same instant),
    // when a claim set it aside waiting for it, is due now. Run after the
    // UPDATE above: a claim that set a message aside held its predecessor for
    // share, so that UPDATE waited for it and this statement sees what it did.
    // The UPDATE checks again that nothing claimed it meanwhile (naming no
    // state, so that it finds the row by id: see take_free).
    long long due = now, later = now, delivered_at = now, set_aside = now;
    sql << s.release_next, soci::use(due, "due"), soci::use(set_aside, "set_aside"),
        soci::use(delivered_at, "delivered"), soci::use(later, "later");
}

std::size_t requeue(unit_of_work& uow, const std::optional<std::string>& id, std::int64_t now) {
    soci::session& sql = uow.sql();
    const outbox_statements& s = statements(uow);
    long long at = now;
    soci::statement st = id ? unnamed_statement(sql, s.requeue_one, soci::use(at, "at"), soci::use(*id, "id"))
                            : unnamed_statement(sql, s.requeue_all, soci::use(at, "at"));
    st.execute(true);
    return static_cast<std::size_t>(st.get_affected_rows());
}

totals count(unit_of_work& uow) {
    apply_queue_settings(uow);
    soci::session& sql = uow.sql();
    long long pending = 0, dead = 0, oldest = 0;
    soci::indicator oldest_null = soci::i_null;
    // The pending rows, read in one pass through the due index (it holds all
    // of them, and seq): their number and the oldest in publication order,
    // whose row is then found by seq (SQLite's rowid; on PostgreSQL in the
    // same index). No index keeps them in seq order: the first pending row by
    // seq would be looked for through every row, delivered ones included, or
    // a sort of the pending rows read from the table.
    sql << statements(uow).count, soci::into(pending), soci::into(dead), soci::into(oldest, oldest_null);
    totals t{.pending = pending, .dead = dead};
    if (oldest_null == soci::i_ok) t.oldest_pending = oldest;
    // The intake's are pending too, and published after every message in the outbox.
    long long waiting = 0, first = 0;
    soci::indicator first_null = soci::i_null;
    sql << statements(uow).count_intake, soci::into(waiting), soci::into(first, first_null);
    t.pending += waiting;
    if (!t.oldest_pending && first_null == soci::i_ok) t.oldest_pending = first;
    return t;
}

std::size_t purge(unit_of_work& uow, std::size_t limit, std::int64_t delivered_before) {
    apply_queue_settings(uow);
    soci::session& sql = uow.sql();
    long long before = delivered_before, n = static_cast<long long>(limit);
    // Taken through the delivered rows' index, deleted by id.
    soci::statement st = unnamed_statement(sql, statements(uow).purge, soci::use(before, "before"), soci::use(n, "n"));
    st.execute(true);
    return static_cast<std::size_t>(st.get_affected_rows());
}

bool exists(soci::session& sql) {
    long long n = 0;
    sql << dialect_of(sql).outbox().exists, soci::into(n);
    return n > 0;
}

std::size_t count_delivered(soci::session& sql, std::int64_t delivered_before) {
    long long n = 0, before = delivered_before;
    sql << dialect_of(sql).outbox().count_delivered, soci::use(before, "before"), soci::into(n);
    return static_cast<std::size_t>(n);
}

std::vector<dead_row> dead_letters(unit_of_work& uow, std::size_t limit) {
    soci::session& sql = uow.sql();
    const std::size_t room = vector_room(limit);
    std::vector<std::string> id(room), topic(room), answer(room);
    std::vector<soci::indicator> answer_null(room);
    std::vector<int> attempts(room);
    long long n = static_cast<long long>(limit);
    sql << statements(uow).dead_letters, soci::use(n, "n"), soci::into(id), soci::into(topic), soci::into(attempts),
        soci::into(answer, answer_null);
    std::vector<dead_row> rows;
    for (std::size_t i = 0; i < id.size(); ++i)
        rows.push_back({std::move(id[i]), std::move(topic[i]), attempts[i],
                        answer_null[i] == soci::i_ok ? std::move(answer[i]) : std::string()});
    return rows;
}

}  // namespace idem::detail::outbox_table
