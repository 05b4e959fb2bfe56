#include "sql/operations_table.hpp"

#include <soci/soci.h>

#include <chrono>
#include <span>

#include "idem/error.hpp"
#include "internal/crypto.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/unnamed_statement.hpp"

namespace idem::detail::operations_table {
namespace {

int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

time_point at_ms(long long ms) {
    return time_point(std::chrono::milliseconds(ms));
}

operation_phase phase_of(int state, bool compensating) {
    if (state == 1) return compensating ? operation_phase::compensated : operation_phase::completed;
    return compensating ? operation_phase::compensating : operation_phase::running;
}

// The columns every read of operations takes, bound to a statement, and the
// operation_state they make.
struct operation_row {
    std::string record_id, name_space, input, result, last_error;
    long long fence = 0, point = 0, from = 0, completions = 0, failures = 0, expires = 0, updated = 0, now = 0;
    int stored = 0;
    soci::indicator from_null = soci::i_ok, input_null = soci::i_ok, result_null = soci::i_ok, error_null = soci::i_ok;

    static std::string columns(soci::session& sql) {
        return "record_id, namespace, state, fence, recovery_point, compensate_from, completions, failures, "
               "expires_at, updated_at, " +
               std::string(dialect_of(sql).clock_ms()) + ", input, result, last_error";
    }

    void bind(soci::statement& st) {
        st.exchange(soci::into(record_id));
        st.exchange(soci::into(name_space));
        st.exchange(soci::into(stored));
        st.exchange(soci::into(fence));
        st.exchange(soci::into(point));
        st.exchange(soci::into(from, from_null));
        st.exchange(soci::into(completions));
        st.exchange(soci::into(failures));
        st.exchange(soci::into(expires));
        st.exchange(soci::into(updated));
        st.exchange(soci::into(now));
        st.exchange(soci::into(input, input_null));
        st.exchange(soci::into(result, result_null));
        st.exchange(soci::into(last_error, error_null));
    }

    [[nodiscard]] operation_state state() const {
        operation_state s;
        s.record_id = record_id;
        s.name_space = name_space;
        s.phase = phase_of(stored, from_null == soci::i_ok);
        s.fence = fence;
        s.recovery_point = static_cast<std::size_t>(point);
        s.completions = static_cast<int>(completions);
        s.failures = static_cast<int>(failures);
        if (from_null == soci::i_ok) s.compensate_from = static_cast<std::size_t>(from);
        s.expires_at = at_ms(expires);
        s.updated_at = at_ms(updated);
        s.now = at_ms(now);
        s.input_bytes = input_null == soci::i_ok ? input.size() / 2 : 0;
        if (result_null == soci::i_ok) s.result = from_hex(result);
        if (error_null == soci::i_ok) s.last_error = last_error;
        return s;
    }
};

}  // namespace

std::string to_hex(std::string_view bytes) {
    return hex(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

std::string from_hex(std::string_view text) {
    std::string bytes;
    bytes.reserve(text.size() / 2);
    for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
        const int high = nibble(text[i]), low = nibble(text[i + 1]);
        if (high < 0 || low < 0) break;
        bytes.push_back(static_cast<char>(high * 16 + low));
    }
    if (bytes.size() * 2 != text.size())
        throw store_error(store_failure::corrupt_record,
                          "idem: a stored operation's bytes are not the hex idem writes");
    return bytes;
}

std::string clock(soci::session& sql) {
    return std::string(dialect_of(sql).clock_ms());
}

std::string row_lock(soci::session& sql) {
    return std::string(dialect_of(sql).lock_clause());
}

bool exists(soci::session& sql) {
    long long n = 0;
    sql << "SELECT COUNT(*) FROM idem_schema_versions WHERE name LIKE '%\\_completer' ESCAPE '\\'", soci::into(n);
    return n > 0;
}

std::optional<operation_state> read(soci::session& sql, const std::string& record_id) {
    operation_row row;
    soci::statement st(sql);
    row.bind(st);
    st.exchange(soci::use(record_id));
    prepare_statement(st, "SELECT " + operation_row::columns(sql) + " FROM idem_operations WHERE record_id = :id");
    if (!st.execute(true)) return std::nullopt;
    operation_state s = row.state();

    long long index = 0, step_updated = 0;
    int kind = 0, stored = 0, attempts = 0;
    std::string name, step_result;
    soci::indicator step_result_null = soci::i_ok;
    soci::statement steps = unnamed_statement(
        sql,
        "SELECT step_index, name, kind, state, attempts, result, updated_at FROM idem_steps WHERE record_id = :id "
        "ORDER BY step_index",
        soci::into(index), soci::into(name), soci::into(kind), soci::into(stored), soci::into(attempts),
        soci::into(step_result, step_result_null), soci::into(step_updated), soci::use(record_id));
    steps.execute();
    while (steps.fetch()) {
        const auto position = static_cast<std::size_t>(index);
        s.steps.push_back({.position = position,
                           .name = name,
                           .call = kind == 1,
                           .answered = stored == 1,
                           .compensation = s.compensate_from && position >= *s.compensate_from,
                           .attempts = attempts,
                           .result = step_result_null == soci::i_ok ? from_hex(step_result) : std::string(),
                           .updated_at = at_ms(step_updated)});
    }
    return s;
}

std::vector<operation_state> unfinished(soci::session& sql, std::string_view name_space, std::size_t limit) {
    const std::string ns(name_space);
    const long long n = static_cast<long long>(limit);
    operation_row row;
    soci::statement st(sql);
    row.bind(st);
    st.exchange(soci::use(ns, "ns"));
    st.exchange(soci::use(ns, "ns2"));
    st.exchange(soci::use(n, "n"));
    // Through the (state, expires_at) index, as the completer finds them.
    prepare_statement(st, "SELECT " + operation_row::columns(sql) +
                              " FROM idem_operations WHERE state = 0 AND (:ns = '' OR namespace = :ns2) ORDER BY "
                              "expires_at LIMIT :n");
    st.execute();
    std::vector<operation_state> found;
    while (st.fetch()) found.push_back(row.state());
    return found;
}

backlog count_unfinished(soci::session& sql) {
    long long unfinished = 0, overdue = 0, oldest = 0, now = 0;
    soci::indicator oldest_null = soci::i_ok, overdue_null = soci::i_ok;
    const std::string clock_now = clock(sql);
    sql << "SELECT COUNT(*), SUM(CASE WHEN expires_at <= " + clock_now + " THEN 1 ELSE 0 END), MIN(expires_at), " +
               clock_now + " FROM idem_operations WHERE state = 0",
        soci::into(unfinished), soci::into(overdue, overdue_null), soci::into(oldest, oldest_null), soci::into(now);
    backlog b{.unfinished = unfinished, .overdue = overdue_null == soci::i_ok ? overdue : 0};
    if (oldest_null == soci::i_ok && oldest < now) b.lag_ms = now - oldest;
    return b;
}

std::vector<due_row> due(soci::session& sql, std::span<const std::string> namespaces, std::size_t limit) {
    if (namespaces.empty()) return {};
    std::string in;
    for (std::size_t i = 0; i < namespaces.size(); ++i) in += (i == 0 ? ":ns" : ", :ns") + std::to_string(i);
    const long long n = static_cast<long long>(limit);
    due_row row;
    soci::statement st(sql);
    st.exchange(soci::into(row.record_id));
    st.exchange(soci::into(row.name_space));
    st.exchange(soci::into(row.failures));
    for (std::size_t i = 0; i < namespaces.size(); ++i) st.exchange(soci::use(namespaces[i], "ns" + std::to_string(i)));
    st.exchange(soci::use(n, "n"));
    prepare_statement(st,
                      "SELECT record_id, namespace, failures FROM idem_operations WHERE state = 0 AND expires_at <= " +
                          clock(sql) + " AND namespace IN (" + in + ") ORDER BY expires_at LIMIT :n");
    st.execute();
    std::vector<due_row> rows;
    while (st.fetch()) rows.push_back(row);
    return rows;
}

std::size_t purge(soci::session& sql, std::size_t limit, std::int64_t older_than_ms) {
    long long before = 0;
    const long long n = static_cast<long long>(limit), older = older_than_ms;
    sql << "SELECT " + clock(sql) + " - :older", soci::use(older), soci::into(before);
    // Taken first and held until COMMIT (PostgreSQL locks them, skipping rows a
    // run is taking over; SQLite's writer holds the database), then deleted one
    // by one: a DELETE ... WHERE IN (SELECT ... LIMIT ... FOR UPDATE) may run its
    // subquery again for every row it meets and go past the batch.
    std::vector<std::string> ids(limit);
    sql << "SELECT record_id FROM idem_operations WHERE state = 1 AND expires_at <= :before ORDER BY expires_at "
           "LIMIT :n" +
               std::string(dialect_of(sql).claim_clause()),
        soci::use(before, "before"), soci::use(n, "n"), soci::into(ids);
    if (ids.empty()) return 0;
    sql << "DELETE FROM idem_steps WHERE record_id = :id", soci::use(ids);
    sql << "DELETE FROM idem_operations WHERE record_id = :id", soci::use(ids);
    return ids.size();
}

std::size_t count_expired(soci::session& sql, std::int64_t older_than_ms) {
    long long n = 0;
    const long long older = older_than_ms;
    sql << "SELECT COUNT(*) FROM idem_operations WHERE state = 1 AND expires_at <= " + clock(sql) + " - :older",
        soci::use(older), soci::into(n);
    return static_cast<std::size_t>(n);
}

void put_off(soci::session& sql, const std::string& record_id, std::optional<std::int64_t> fence, std::int64_t wait_ms,
             std::string_view what, bool failed) {
    // The column is text: what an exception says, cut to 1 KiB of printable ASCII.
    std::string kept(what.substr(0, 1024));
    for (char& c : kept)
        if (c < ' ' || c > '~') c = '?';
    const long long wait = wait_ms, added = failed ? 1 : 0, run = fence.value_or(0);
    const std::string now = clock(sql);
    soci::statement st(sql);
    st.exchange(soci::use(wait, "wait"));
    st.exchange(soci::use(kept, "e"));
    st.exchange(soci::use(added, "added"));
    st.exchange(soci::use(record_id, "id"));
    if (fence) st.exchange(soci::use(run, "fence"));
    // Its run's fence, or a lease that ended: never a run's that took it over meanwhile.
    prepare_statement(st, "UPDATE idem_operations SET expires_at = " + now +
                              " + :wait, last_error = :e, failures = failures + :added, updated_at = " + now +
                              " WHERE record_id = :id AND state = 0 AND " +
                              (fence ? "fence = :fence" : "expires_at <= " + now));
    st.execute(true);
}

release_outcome release(soci::session& sql, const std::string& record_id, bool compensate) {
    // Locked first, so the position below counts every step stored before.
    long long fence = 0;
    int compensates = 0;
    soci::indicator known = soci::i_ok;
    sql << "SELECT fence, compensates FROM idem_operations WHERE record_id = :id AND state = 0" + row_lock(sql),
        soci::into(fence), soci::into(compensates, known), soci::use(record_id);
    if (!sql.got_data()) return release_outcome::not_found;
    // One begun before the column says nothing: its completer drops the mark if it has no compensation.
    if (compensate && known == soci::i_ok && compensates == 0) return release_outcome::no_compensation;
    const std::string now = clock(sql);
    const std::string mark = compensate
                                 ? ", compensate_from = COALESCE(compensate_from, (SELECT COALESCE(MAX(step_index) "
                                   "+ 1, 0) FROM idem_steps WHERE record_id = :id2))"
                                 : "";
    const std::string text = "UPDATE idem_operations SET fence = fence + 1, expires_at = " + now +
                             ", updated_at = " + now + mark + " WHERE record_id = :id AND state = 0";
    soci::statement update = compensate
                                 ? unnamed_statement(sql, text, soci::use(record_id, "id2"), soci::use(record_id, "id"))
                                 : unnamed_statement(sql, text, soci::use(record_id, "id"));
    update.execute(true);
    return update.get_affected_rows() == 1 ? release_outcome::released : release_outcome::not_found;
}

}  // namespace idem::detail::operations_table
