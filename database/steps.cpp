// Operations in steps: the operation's row (lease, fencing token, recovery
// point, final result) and its steps' rows in idem_operations and idem_steps,
// written by the database's own units of work, so each step's transaction is
// retried on transient conflicts like any other.
#include "idem/steps.hpp"

#include <soci/soci.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>

#include "idem/database.hpp"
#include "idem/encryption.hpp"
#include "idem/error.hpp"
#include "idem/keys.hpp"
#include "internal/crypto.hpp"
#include "sql/operations_statements.hpp"
#include "sql/operations_table.hpp"
#include "sql/record_id.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/unnamed_statement.hpp"

namespace idem {

namespace operations = detail::operations_table;

namespace detail {
namespace {

constexpr int kind_step = 0;
constexpr int kind_call = 1;

long long millis(std::chrono::nanoseconds d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

const char* kind_name(int kind) {
    return kind == kind_call ? "call" : "step";
}

struct stored_step {
    std::string name;
    int kind = 0;
    int state = 0;
    std::string result;
};

}  // namespace

struct steps_state {
    database* db = nullptr;
    std::string record_id;  // lowercase hex of the record's 16-byte id
    std::string key_hash;   // what messages name the operation by
    std::string name_space;
    std::string fingerprint;  // hex
    std::string input;        // the bytes the operation began with
    long long lease_ms = 0, retention_ms = 0, failure_retention_ms = 0;
    // The dialect's SQL for the operation's tables, from the session the run
    // begins on (its statements read the database's own clock, so instances
    // with skewed clocks agree).
    const operations_statements* sql_text = nullptr;
    std::shared_ptr<const encryption_keys> keys;  // seals what the tables keep, when set

    execution_status decision = execution_status::executed;
    std::string stored_result;
    long long fence = 0;
    std::size_t recovery_point = 0;
    std::size_t next = 0;       // the position of the next step this run meets
    std::size_t completed = 0;  // the steps this run stored or found stored
    std::set<std::string, std::less<>> names;
    std::size_t pending_call = 0;
    std::string pending_call_name;
    bool compensating = false;        // this run undoes the operation, from `next` on
    std::size_t compensate_from = 0;  // where its compensation's steps begin, when compensating
    takeover_note note = takeover_note::none;

    // The position of the next step, after checking its name.
    std::size_t claim(std::string_view name) {
        if (!keys::is_valid(name))
            throw std::invalid_argument(
                "idem: a step name is 1 to 255 printable ASCII characters, without spaces, '\"' or '\\'");
        if (!names.emplace(name).second)
            throw std::invalid_argument("idem: the operation names two steps '" + std::string(name) + "'");
        return next++;
    }

    // Locks the operation's row and checks it still carries this run's fence;
    // `refused` says what lease_lost means for the caller (what did not happen).
    void hold(soci::session& sql, std::string_view refused) const {
        long long current = 0;
        int state = 0;
        sql << sql_text->hold, soci::into(current), soci::into(state), soci::use(record_id, "id");
        if (!sql.got_data())
            throw lease_lost("idem: operation " + key_hash +
                             " is gone (its key was released or purged): " + std::string(refused));
        if (current != fence || state != 0)
            throw lease_lost("idem: operation " + key_hash + " was taken over by a newer run (fence " +
                             std::to_string(current) + ", this run's " + std::to_string(fence) +
                             "): " + std::string(refused));
    }

    // Moves the recovery point to `point` and renews the lease, under this run's fence.
    void advance(soci::session& sql, std::size_t point, std::string_view refused) const {
        const long long at = static_cast<long long>(point);
        soci::statement update =
            unnamed_statement(sql, sql_text->advance, soci::use(at, "point"), soci::use(lease_ms, "lease"),
                              soci::use(record_id, "id"), soci::use(fence, "fence"));
        update.execute(true);
        if (update.get_affected_rows() != 1)
            throw lease_lost("idem: operation " + key_hash + " was taken over by a newer run: " + std::string(refused));
    }

    // A step's result, a call's answer or the final result as its table keeps
    // it (hex): sealed when keys are set, bound to the operation and its place
    // ("3", "result"), so a payload moved to another step or operation does not open.
    [[nodiscard]] std::string stored_form(std::string_view plain, std::string_view place) const {
        if (!keys) return operations::to_hex(plain);
        return operations::to_hex(keys->seal(plain, record_id + "/" + std::string(place)));
    }
    [[nodiscard]] std::string stored_form(std::string_view plain, std::size_t index) const {
        return stored_form(plain, std::to_string(index));
    }
    // The plaintext of what stored_form wrote; payload_unreadable when it is
    // sealed and no key of the ring opens it (never a rerun of what it records).
    [[nodiscard]] std::string opened(std::string_view stored_hex, std::string_view place) const {
        std::string bytes = operations::from_hex(stored_hex);
        if (!encryption_keys::is_sealed(bytes)) return bytes;
        if (!keys)
            throw payload_unreadable(payload_unreadable::reason::unknown_key,
                                     "idem: what operation " + key_hash + " stored is sealed (" + std::string(place) +
                                         "), and no encryption keys are configured");
        return keys->open(bytes, record_id + "/" + std::string(place));
    }
    [[nodiscard]] std::string opened(std::string_view stored_hex, std::size_t index) const {
        return opened(stored_hex, std::to_string(index));
    }

    [[nodiscard]] std::optional<stored_step> read(soci::session& sql, std::size_t index) const {
        stored_step s;
        soci::indicator result_null = soci::i_ok;
        const long long at = static_cast<long long>(index);
        sql << sql_text->read_step, soci::into(s.name), soci::into(s.kind), soci::into(s.state),
            soci::into(s.result, result_null), soci::use(record_id, "id"), soci::use(at, "i");
        if (!sql.got_data()) return std::nullopt;
        if (result_null != soci::i_ok) s.result.clear();
        return s;
    }

    void check_shape(const stored_step& stored, std::string_view name, int kind, std::size_t index) const {
        if (stored.name == name && stored.kind == kind) return;
        throw steps_shape_changed(index, "idem: operation " + key_hash + " stored " + kind_name(stored.kind) + " '" +
                                             stored.name + "' at position " + std::to_string(index) +
                                             "; this run has " + kind_name(kind) + " '" + std::string(name) +
                                             "' there. Steps and their order may not change under a key");
    }

    void insert(soci::session& sql, std::size_t index, std::string_view name, int kind, int attempts,
                const std::optional<std::string>& result) const {
        const long long at = static_cast<long long>(index);
        const std::string step_name(name);
        const int state = result ? 1 : 0;
        const std::string text = result ? stored_form(*result, index) : std::string();
        soci::indicator result_null = result ? soci::i_ok : soci::i_null;
        sql << sql_text->insert_step, soci::use(record_id, "id"), soci::use(at, "i"), soci::use(step_name, "name"),
            soci::use(kind, "kind"), soci::use(state, "state"), soci::use(text, result_null, "result"),
            soci::use(attempts, "attempts");
    }
};

}  // namespace detail

steps::steps(std::unique_ptr<detail::steps_state> state) noexcept : state_(std::move(state)) {}
steps::steps(steps&&) noexcept = default;
steps& steps::operator=(steps&&) noexcept = default;
steps::~steps() = default;

std::string steps::call_key(std::string_view name) const {
    return keys::derive("idem.call", {state_->record_id, name});
}

std::size_t steps::recovery_point() const noexcept {
    return state_->recovery_point;
}

std::int64_t steps::fence() const noexcept {
    return state_->fence;
}

const std::string& steps::input() const noexcept {
    return state_->input;
}

bool steps::compensating() const noexcept {
    return state_->compensating;
}

detail::takeover_note steps::note() const noexcept {
    return state_->note;
}

execution_status steps::decision() const noexcept {
    return state_->decision;
}

const std::string& steps::stored_result() const noexcept {
    return state_->stored_result;
}

std::optional<std::string> steps::run_step(std::string_view name,
                                           detail::function_ref<std::string(unit_of_work&)> work) {
    detail::steps_state& s = *state_;
    const std::size_t index = s.claim(name);
    int attempts = 0;
    std::optional<std::string> found = s.db->transact([&](unit_of_work& uow) -> std::optional<std::string> {
        ++attempts;
        soci::session& sql = uow.sql();
        s.hold(sql, "its step '" + std::string(name) + "' did not run");
        if (auto stored = s.read(sql, index)) {
            s.check_shape(*stored, name, detail::kind_step, index);
            return s.opened(stored->result, index);
        }
        std::optional<std::string> result = work(uow);
        s.insert(sql, index, name, detail::kind_step, attempts, result);
        s.advance(sql, index + 1, "its step '" + std::string(name) + "' rolled back");
        return std::nullopt;
    });
    ++s.completed;
    return found;
}

std::optional<std::string> steps::begin_call(std::string_view name) {
    detail::steps_state& s = *state_;
    const std::size_t index = s.claim(name);
    call_key_ = call_key(name);
    s.pending_call = index;
    s.pending_call_name = name;
    const std::string not_made = "its call '" + std::string(name) + "' was not made";
    std::optional<std::string> answer = s.db->transact([&](unit_of_work& uow) -> std::optional<std::string> {
        soci::session& sql = uow.sql();
        s.hold(sql, not_made);
        if (auto stored = s.read(sql, index)) {
            s.check_shape(*stored, name, detail::kind_call, index);
            if (stored->state == 1) return s.opened(stored->result, index);
            // Made before and never answered (a crash, a throw): made again with the same call key.
            const long long at = static_cast<long long>(index);
            sql << s.sql_text->call_again, soci::use(s.record_id, "id"), soci::use(at, "i");
        } else {
            s.insert(sql, index, name, detail::kind_call, 1, std::nullopt);
        }
        s.advance(sql, index, not_made);
        return std::nullopt;
    });
    if (answer) ++s.completed;
    return answer;
}

void steps::end_call(const std::string& answer) {
    detail::steps_state& s = *state_;
    const std::string text = s.stored_form(answer, s.pending_call);
    // The call was made; the run that took over makes it again with the same call key.
    const std::string not_stored = "the answer of its call '" + s.pending_call_name + "' was not stored";
    s.db->transact([&](unit_of_work& uow) {
        soci::session& sql = uow.sql();
        s.hold(sql, not_stored);
        const long long at = static_cast<long long>(s.pending_call);
        sql << s.sql_text->answer_call, soci::use(text, "result"), soci::use(s.record_id, "id"), soci::use(at, "i");
        s.advance(sql, s.pending_call + 1, not_stored);
    });
    ++s.completed;
}

std::optional<std::string> steps::stored_bytes(std::string_view name) const {
    const detail::steps_state& s = *state_;
    const std::string step_name(name);
    // The operation's own steps: those before its compensation's, when it compensates.
    const long long before = s.compensating ? static_cast<long long>(s.compensate_from) : -1;
    return s.db->read([&](soci::session& sql) -> std::optional<std::string> {
        std::string result;
        long long index = 0;
        soci::indicator result_null = soci::i_ok;
        sql << s.sql_text->stored_by_name, soci::into(result, result_null), soci::into(index),
            soci::use(s.record_id, "id"), soci::use(step_name, "name"), soci::use(before, "before"),
            soci::use(before, "before2");
        if (!sql.got_data() || result_null != soci::i_ok) return std::nullopt;
        return s.opened(result, static_cast<std::size_t>(index));
    });
}

void steps::finish(const std::string& payload, classification how) {
    detail::steps_state& s = *state_;
    const std::string text = s.stored_form(payload, "result");
    constexpr std::string_view not_stored = "its final result was not stored (every step it stored stays)";
    s.db->transact([&](unit_of_work& uow) {
        soci::session& sql = uow.sql();
        s.hold(sql, not_stored);
        // A step that failed and was caught stored nothing; every stored one must have been met.
        long long stored = 0;
        sql << s.sql_text->count_stored, soci::into(stored), soci::use(s.record_id, "id");
        if (static_cast<std::size_t>(stored) != s.completed)
            throw steps_shape_changed(s.next, "idem: operation " + s.key_hash + " has " + std::to_string(stored) +
                                                  " stored steps; this run met " + std::to_string(s.completed) +
                                                  " of them. Steps and their order may not change under a key");
        if (how == classification::release) {
            sql << s.sql_text->delete_steps, soci::use(s.record_id, "id");
            sql << s.sql_text->delete_fenced, soci::use(s.record_id, "id"), soci::use(s.fence, "fence");
            return;
        }
        const long long retention = how == classification::store_as_failure ? s.failure_retention_ms : s.retention_ms;
        const long long point = static_cast<long long>(s.next);
        soci::statement update = detail::unnamed_statement(sql, s.sql_text->finish, soci::use(text, "result"),
                                                           soci::use(point, "point"), soci::use(retention, "retention"),
                                                           soci::use(s.record_id, "id"), soci::use(s.fence, "fence"));
        update.execute(true);
        if (update.get_affected_rows() != 1)
            throw lease_lost("idem: operation " + s.key_hash +
                             " was taken over by a newer run: " + std::string(not_stored));
    });
}

void steps::abandon() noexcept {
    detail::steps_state& s = *state_;
    try {
        s.db->transact([&](unit_of_work& uow) {
            uow.sql() << s.sql_text->abandon, soci::use(s.record_id, "id"), soci::use(s.fence, "fence");
        });
    } catch (...) {
        // The lease then ends when it would have; a retry resumes after it.
    }
}

void steps::fail(std::string_view what, std::chrono::milliseconds wait, bool counted) noexcept {
    detail::steps_state& s = *state_;
    try {
        s.db->transact([&](unit_of_work& uow) {
            operations::put_off(uow.sql(), s.record_id, s.fence, wait.count(), what, counted);
        });
    } catch (...) {
        // The lease then ends when it would have; the next pass takes it over after it.
    }
}

namespace detail {
namespace {

// A run's state before it begins: what every statement needs to know of the
// operation and of the database.
std::unique_ptr<steps_state> state_for(database& db, std::string record_id, std::string name_space,
                                       const resolved_options& resolved) {
    auto state = std::make_unique<steps_state>();
    steps_state& s = *state;
    s.db = &db;
    s.key_hash = record_id.substr(0, 16);  // what record_key::key_hash() prints: the digest's first 8 bytes
    s.record_id = std::move(record_id);
    s.name_space = std::move(name_space);
    s.lease_ms = millis(resolved.lease);
    s.retention_ms = millis(resolved.retention);
    s.failure_retention_ms = millis(resolved.failure_retention);
    s.keys = resolved.encryption;
    return state;
}

// Clears what an earlier attempt of the start's transaction left, and finds
// the dialect's SQL from the session the run begins on.
void reset(soci::session& sql, steps_state& s) {
    s.sql_text = &dialect_of(sql).operations();
    s.decision = execution_status::executed;
    s.stored_result.clear();
    s.fence = 1;
    s.recovery_point = 0;
    s.next = 0;
    s.completed = 0;
    s.compensating = false;
    s.note = takeover_note::none;
}

// The operation's row as a run that may take it over reads it.
struct operation_row {
    std::string name_space, fingerprint, result, input;
    long long fence = 0, expires_at = 0, now = 0, compensate_from = 0, completions = 0, failures = 0;
    int recovery_point = 0, state = 0;
    soci::indicator result_null = soci::i_ok, input_null = soci::i_ok, from_null = soci::i_ok;

    [[nodiscard]] bool live() const { return expires_at > now; }
    [[nodiscard]] bool marked_to_compensate() const { return from_null == soci::i_ok; }
};

// Reads the operation's row and holds it until COMMIT; nothing when there is none.
std::optional<operation_row> read_locked(soci::session& sql, const steps_state& s) {
    operation_row r;
    sql << s.sql_text->read_locked, soci::into(r.name_space), soci::into(r.fingerprint), soci::into(r.fence),
        soci::into(r.recovery_point), soci::into(r.state), soci::into(r.result, r.result_null),
        soci::into(r.expires_at), soci::into(r.now), soci::into(r.input, r.input_null),
        soci::into(r.compensate_from, r.from_null), soci::into(r.completions), soci::into(r.failures),
        soci::use(s.record_id, "id");
    if (!sql.got_data()) return std::nullopt;
    return r;
}

// Takes the locked operation over for this run, its row as `row` says: the
// fence moves on, so the run before can write no step more, and the lease is
// this run's.
void take(soci::session& sql, steps_state& s, const operation_row& row) {
    const long long taken = row.fence + 1;
    soci::indicator marked = row.from_null;
    sql << s.sql_text->take, soci::use(taken, "fence"), soci::use(row.completions, "completions"),
        soci::use(row.compensate_from, marked, "from"), soci::use(s.lease_ms, "lease"), soci::use(s.record_id, "id");
    s.fence = taken;
    s.recovery_point = static_cast<std::size_t>(row.recovery_point);
    s.input = row.input_null == soci::i_ok ? operations::from_hex(row.input) : std::string();
}

// A request's run: a new operation, a replay, or a takeover of one whose lease ended.
void begin(soci::session& sql, steps_state& s, const std::string& input, bool compensates) {
    reset(sql, s);
    const std::string input_hex = operations::to_hex(input);
    const int compensable = compensates ? 1 : 0;
    int inserted = 0;
    soci::statement insert =
        unnamed_statement(sql, s.sql_text->begin, soci::use(s.record_id, "id"), soci::use(s.name_space, "ns"),
                          soci::use(s.fingerprint, "fp"), soci::use(s.lease_ms, "lease"), soci::use(input_hex, "input"),
                          soci::use(compensable, "compensates"), soci::into(inserted));
    if (insert.execute(true)) {  // a row back: this statement inserted it
        s.input = input;
        return;
    }
    std::optional<operation_row> found = read_locked(sql, s);
    // The row the INSERT met was deleted before it could be read (a purge, a
    // run whose result was classified release): the transaction runs again.
    if (!found)
        throw store_error(store_failure::lost_race,
                          "idem: operation " + s.key_hash + " was deleted while this run began; it begins again");
    operation_row& row = *found;
    if (row.state == 1 && row.live()) {
        if (row.fingerprint != s.fingerprint) {
            s.decision = execution_status::key_reused;
        } else {
            s.decision = execution_status::replayed;
            s.stored_result = s.opened(row.result_null == soci::i_ok ? row.result : std::string(), "result");
        }
        return;
    }
    // Unfinished work belongs to the request that started it, live or not.
    if (row.state == 0 && row.fingerprint != s.fingerprint) {
        s.decision = execution_status::key_reused;
        return;
    }
    // Being undone is the completer's: it runs the operation's compensation.
    if (row.state == 0 && (row.live() || row.marked_to_compensate())) {
        s.decision = execution_status::in_flight;
        return;
    }
    if (row.state == 1) {  // its retention ended: a new operation under the key
        sql << s.sql_text->delete_steps, soci::use(s.record_id, "id");
        sql << s.sql_text->renew, soci::use(s.fingerprint, "fp"), soci::use(input_hex, "input"),
            soci::use(compensable, "compensates"), soci::use(s.record_id, "id");
        row.recovery_point = 0;
        row.input = input_hex;
        row.input_null = soci::i_ok;
        row.completions = 0;
        row.from_null = soci::i_null;
    }
    take(sql, s, row);
}

// The completer's run: a takeover of an unfinished operation whose lease
// ended, which compensates once `compensate_after` runs of the completer failed.
void take_over(soci::session& sql, steps_state& s, const completion_policy& policy) {
    reset(sql, s);
    std::optional<operation_row> found = read_locked(sql, s);
    // Finished, gone, or another run holds it now: nothing to take over.
    if (!found || found->name_space != s.name_space || found->state != 0 || found->live()) {
        s.decision = execution_status::in_flight;
        return;
    }
    operation_row& row = *found;
    if (row.marked_to_compensate() && !policy.compensates) {
        // Marked by an operator (idem complete --compensate), and its namespace
        // registers no compensation: the mark goes, and it runs forward.
        row.from_null = soci::i_null;
        s.note = takeover_note::no_compensation;
    } else if (!row.marked_to_compensate() && policy.compensates && row.failures >= policy.compensate_after) {
        // The row is locked: every step stored before is counted.
        sql << s.sql_text->next_step_index, soci::into(row.compensate_from), soci::use(s.record_id, "id");
        row.from_null = soci::i_ok;
        s.note = takeover_note::compensation_begins;
    } else if (row.marked_to_compensate()) {
        s.note = takeover_note::compensation_resumes;
    }
    ++row.completions;
    take(sql, s, row);
    s.fingerprint = row.fingerprint;
    if (row.marked_to_compensate()) {
        // Its compensation's steps follow the operation's own; those stay as they are.
        long long stored = 0;
        sql << s.sql_text->count_stored_before, soci::into(stored), soci::use(s.record_id, "id"),
            soci::use(row.compensate_from, "from");
        s.compensating = true;
        s.compensate_from = static_cast<std::size_t>(row.compensate_from);
        s.next = s.compensate_from;
        s.completed = static_cast<std::size_t>(stored);
    }
}

}  // namespace
}  // namespace detail

steps database::start_steps(const record_key& key, std::string_view fingerprint, const std::string& input,
                            bool compensates, const execution_options& options) {
    if (fingerprint.empty()) throw std::invalid_argument("idem: the fingerprint is empty");
    std::unique_ptr<detail::steps_state> state = detail::state_for(
        *this, detail::hex(detail::record_id(key.digest())), key.name_space(), executor().options().resolve(options));
    detail::steps_state& s = *state;
    s.fingerprint = operations::to_hex(fingerprint);
    transact([&](unit_of_work& uow) { detail::begin(uow.sql(), s, input, compensates); });
    return idem::steps(std::move(state));
}

steps database::take_over(const std::string& record_id, const std::string& name_space,
                          const detail::completion_policy& policy, const execution_options& options) {
    std::unique_ptr<detail::steps_state> state =
        detail::state_for(*this, record_id, name_space, executor().options().resolve(options));
    transact([&](unit_of_work& uow) { detail::take_over(uow.sql(), *state, policy); });
    return idem::steps(std::move(state));
}

}  // namespace idem
