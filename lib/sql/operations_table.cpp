#include "sql/operations_table.hpp"

#include <soci/soci.h>

#include <chrono>
#include <span>

#include "idem/error.hpp"
#include "internal/crypto.hpp"
#include "sql/operations_statements.hpp"
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

const operations_statements& statements(soci::session& sql) {
    return dialect_of(sql).operations();
}

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

bool exists(soci::session& sql) {
    long long n = 0;
    sql << statements(sql).exists, soci::into(n);
    return n > 0;
}

std::optional<operation_state> read(soci::session& sql, const std::string& record_id) {
    operation_row row;
    soci::statement st(sql);
    row.bind(st);
    st.exchange(soci::use(record_id, "id"));
    prepare_statement(st, statements(sql).read_operation);
    if (!st.execute(true)) return std::nullopt;
    operation_state s = row.state();

    long long index = 0, step_updated = 0;
    int kind = 0, stored = 0, attempts = 0;
    std::string name, step_result;
    soci::indicator step_result_null = soci::i_ok;
    soci::statement steps =
        unnamed_statement(sql, statements(sql).read_steps, soci::into(index), soci::into(name), soci::into(kind),
                          soci::into(stored), soci::into(attempts), soci::into(step_result, step_result_null),
                          soci::into(step_updated), soci::use(record_id, "id"));
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
    prepare_statement(st, statements(sql).unfinished);
    st.execute();
    std::vector<operation_state> found;
    while (st.fetch()) found.push_back(row.state());
    return found;
}

backlog count_unfinished(soci::session& sql) {
    long long unfinished = 0, overdue = 0, oldest = 0, now = 0;
    soci::indicator oldest_null = soci::i_ok, overdue_null = soci::i_ok;
    sql << statements(sql).count_unfinished, soci::into(unfinished), soci::into(overdue, overdue_null),
        soci::into(oldest, oldest_null), soci::into(now);
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
    std::string text = statements(sql).due;
    const std::string_view marker = "{namespaces}";
    text.replace(text.find(marker), marker.size(), in);
    prepare_statement(st, text);
    st.execute();
    std::vector<due_row> rows;
    while (st.fetch()) rows.push_back(row);
    return rows;
}

std::size_t purge(soci::session& sql, std::size_t limit, std::int64_t older_than_ms) {
    long long before = 0;
    const long long n = static_cast<long long>(limit), older = older_than_ms;
    const operations_statements& s = statements(sql);
    sql << s.retention_cutoff, soci::use(older, "older"), soci::into(before);
    // Taken first and held until COMMIT (PostgreSQL locks them, skipping rows a
    // run is taking over; SQLite's writer holds the database), then deleted one
    // by one: a DELETE ... WHERE IN (SELECT ... LIMIT ... FOR UPDATE) may run its
    // subquery again for every row it meets and go past the batch.
    std::vector<std::string> ids(limit);
    sql << s.expired, soci::use(before, "before"), soci::use(n, "n"), soci::into(ids);
    if (ids.empty()) return 0;
    sql << s.delete_steps, soci::use(ids, "id");
    sql << s.delete_operation, soci::use(ids, "id");
    return ids.size();
}

std::size_t count_expired(soci::session& sql, std::int64_t older_than_ms) {
    long long n = 0;
    const long long older = older_than_ms;
    sql << statements(sql).count_expired, soci::use(older, "older"), soci::into(n);
    return static_cast<std::size_t>(n);
}

void put_off(soci::session& sql, const std::string& record_id, std::optional<std::int64_t> fence, std::int64_t wait_ms,
             std::string_view what, bool failed) {
    // The column is text: what an exception says, cut to 1 KiB of printable ASCII.
    std::string kept(what.substr(0, 1024));
    for (char& c : kept)
        if (c < ' ' || c > '~') c = '?';
    const long long wait = wait_ms, added = failed ? 1 : 0, run = fence.value_or(0);
    const operations_statements& s = statements(sql);
    soci::statement st(sql);
    st.exchange(soci::use(wait, "wait"));
    st.exchange(soci::use(kept, "e"));
    st.exchange(soci::use(added, "added"));
    st.exchange(soci::use(record_id, "id"));
    if (fence) st.exchange(soci::use(run, "fence"));
    // Its run's fence, or a lease that ended: never a run's that took it over meanwhile.
    prepare_statement(st, fence ? s.put_off_fenced : s.put_off_expired);
    st.execute(true);
}

release_outcome release(soci::session& sql, const std::string& record_id, bool compensate) {
    // Locked first, so the position below counts every step stored before.
    long long fence = 0;
    int compensates = 0;
    soci::indicator known = soci::i_ok;
    const operations_statements& s = statements(sql);
    sql << s.lock_unfinished, soci::into(fence), soci::into(compensates, known), soci::use(record_id, "id");
    if (!sql.got_data()) return release_outcome::not_found;
    // One begun before the column says nothing: its completer drops the mark if it has no compensation.
    if (compensate && known == soci::i_ok && compensates == 0) return release_outcome::no_compensation;
    soci::statement update = compensate ? unnamed_statement(sql, s.release_compensating, soci::use(record_id, "id2"),
                                                            soci::use(record_id, "id"))
                                        : unnamed_statement(sql, s.release, soci::use(record_id, "id"));
    update.execute(true);
    return update.get_affected_rows() == 1 ? release_outcome::released : release_outcome::not_found;
}

}  // namespace idem::detail::operations_table
