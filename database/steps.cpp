// Operations in steps: the operation's row (lease, fencing token, recovery
// point, final result) and its steps' rows in idem_operations and idem_steps,
// written by the database's own units of work, so each step's transaction is
// retried on transient conflicts like any other.
#include "idem/steps.hpp"

#include <soci/soci.h>

#include <chrono>
#include <functional>
#include <set>
#include <span>
#include <stdexcept>

#include "idem/database.hpp"
#include "idem/keys.hpp"
#include "internal/crypto.hpp"
#include "sql/record_id.hpp"

namespace idem {
namespace detail {
namespace {

constexpr int kind_step = 0;
constexpr int kind_call = 1;

std::string hex_of(std::string_view bytes) {
    return hex(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// A stored result back to its bytes; anything but lowercase hex was not written by idem.
std::string bytes_of(std::string_view text) {
    std::string bytes;
    bytes.reserve(text.size() / 2);
    for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
        const int high = nibble(text[i]), low = nibble(text[i + 1]);
        if (high < 0 || low < 0) break;
        bytes.push_back(static_cast<char>(high * 16 + low));
    }
    if (bytes.size() * 2 != text.size())
        throw store_error(store_failure::corrupt_record, "idem: a stored step result is not the hex idem writes");
    return bytes;
}

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
    long long lease_ms = 0, retention_ms = 0, failure_retention_ms = 0;
    // The database's clock in milliseconds, so instances with skewed clocks agree.
    std::string now;
    std::string lock;  // what a SELECT of the operation's row ends with to hold it until COMMIT

    execution_status decision = execution_status::executed;
    std::string stored_result;
    long long fence = 0;
    std::size_t recovery_point = 0;
    std::size_t next = 0;       // the position of the next step this run meets
    std::size_t completed = 0;  // the steps this run stored or found stored
    std::set<std::string, std::less<>> names;
    std::size_t pending_call = 0;

    // The position of the next step, after checking its name.
    std::size_t claim(std::string_view name) {
        if (!keys::is_valid(name))
            throw std::invalid_argument(
                "idem: a step name is 1 to 255 printable ASCII characters, without spaces, '\"' or '\\'");
        if (!names.emplace(name).second)
            throw std::invalid_argument("idem: the operation names two steps '" + std::string(name) + "'");
        return next++;
    }

    // Locks the operation's row and checks it still carries this run's fence.
    void hold(soci::session& sql) const {
        long long current = 0;
        int state = 0;
        sql << "SELECT fence, state FROM idem_operations WHERE record_id = :id" + lock, soci::into(current),
            soci::into(state), soci::use(record_id);
        if (!sql.got_data() || current != fence || state != 0)
            throw lease_lost("idem: operation " + key_hash + " was taken over by a newer run (fence " +
                             std::to_string(current) + ", this run's " + std::to_string(fence) +
                             "): its step rolled back");
    }

    // Moves the recovery point to `point` and renews the lease, under this run's fence.
    void advance(soci::session& sql, std::size_t point) const {
        const long long at = static_cast<long long>(point);
        soci::statement update =
            (sql.prepare << "UPDATE idem_operations SET recovery_point = :point, expires_at = " + now +
                                " + :lease, updated_at = " + now +
                                " WHERE record_id = :id AND fence = :fence AND state = 0",
             soci::use(at), soci::use(lease_ms), soci::use(record_id), soci::use(fence));
        update.execute(true);
        if (update.get_affected_rows() != 1)
            throw lease_lost("idem: operation " + key_hash + " was taken over by a newer run: its step rolled back");
    }

    [[nodiscard]] std::optional<stored_step> read(soci::session& sql, std::size_t index) const {
        stored_step s;
        soci::indicator result_null = soci::i_ok;
        const long long at = static_cast<long long>(index);
        sql << "SELECT name, kind, state, result FROM idem_steps WHERE record_id = :id AND step_index = :i",
            soci::into(s.name), soci::into(s.kind), soci::into(s.state), soci::into(s.result, result_null),
            soci::use(record_id), soci::use(at);
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
        const std::string text = result ? hex_of(*result) : std::string();
        soci::indicator result_null = result ? soci::i_ok : soci::i_null;
        sql << "INSERT INTO idem_steps (record_id, step_index, name, kind, state, result, attempts, updated_at) "
               "VALUES (:id, :i, :name, :kind, :state, :result, :attempts, " +
                   now + ")",
            soci::use(record_id), soci::use(at), soci::use(step_name), soci::use(kind), soci::use(state),
            soci::use(text, result_null), soci::use(attempts);
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
        s.hold(sql);
        if (auto stored = s.read(sql, index)) {
            s.check_shape(*stored, name, detail::kind_step, index);
            return detail::bytes_of(stored->result);
        }
        std::optional<std::string> result = work(uow);
        s.insert(sql, index, name, detail::kind_step, attempts, result);
        s.advance(sql, index + 1);
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
    std::optional<std::string> answer = s.db->transact([&](unit_of_work& uow) -> std::optional<std::string> {
        soci::session& sql = uow.sql();
        s.hold(sql);
        if (auto stored = s.read(sql, index)) {
            s.check_shape(*stored, name, detail::kind_call, index);
            if (stored->state == 1) return detail::bytes_of(stored->result);
            // Made before and never answered (a crash, a throw): made again with the same call key.
            const long long at = static_cast<long long>(index);
            sql << "UPDATE idem_steps SET attempts = attempts + 1, updated_at = " + s.now +
                       " WHERE record_id = :id AND step_index = :i",
                soci::use(s.record_id), soci::use(at);
        } else {
            s.insert(sql, index, name, detail::kind_call, 1, std::nullopt);
        }
        s.advance(sql, index);
        return std::nullopt;
    });
    if (answer) ++s.completed;
    return answer;
}

void steps::end_call(const std::string& answer) {
    detail::steps_state& s = *state_;
    const std::string text = detail::hex_of(answer);
    s.db->transact([&](unit_of_work& uow) {
        soci::session& sql = uow.sql();
        s.hold(sql);
        const long long at = static_cast<long long>(s.pending_call);
        sql << "UPDATE idem_steps SET state = 1, result = :result, updated_at = " + s.now +
                   " WHERE record_id = :id AND step_index = :i AND state = 0",
            soci::use(text), soci::use(s.record_id), soci::use(at);
        s.advance(sql, s.pending_call + 1);
    });
    ++s.completed;
}

void steps::finish(const std::string& payload, classification how) {
    detail::steps_state& s = *state_;
    const std::string text = detail::hex_of(payload);
    s.db->transact([&](unit_of_work& uow) {
        soci::session& sql = uow.sql();
        s.hold(sql);
        // A step that failed and was caught stored nothing; every stored one must have been met.
        long long stored = 0;
        sql << "SELECT COUNT(*) FROM idem_steps WHERE record_id = :id AND state = 1", soci::into(stored),
            soci::use(s.record_id);
        if (static_cast<std::size_t>(stored) != s.completed)
            throw steps_shape_changed(s.next, "idem: operation " + s.key_hash + " has " + std::to_string(stored) +
                                                  " stored steps; this run met " + std::to_string(s.completed) +
                                                  " of them. Steps and their order may not change under a key");
        if (how == classification::release) {
            sql << "DELETE FROM idem_steps WHERE record_id = :id", soci::use(s.record_id);
            sql << "DELETE FROM idem_operations WHERE record_id = :id AND fence = :fence", soci::use(s.record_id),
                soci::use(s.fence);
            return;
        }
        const long long retention = how == classification::store_as_failure ? s.failure_retention_ms : s.retention_ms;
        const long long point = static_cast<long long>(s.next);
        soci::statement update =
            (sql.prepare << "UPDATE idem_operations SET state = 1, result = :result, recovery_point = :point, "
                            "expires_at = " +
                                s.now + " + :retention, updated_at = " + s.now +
                                " WHERE record_id = :id AND fence = :fence AND state = 0",
             soci::use(text), soci::use(point), soci::use(retention), soci::use(s.record_id), soci::use(s.fence));
        update.execute(true);
        if (update.get_affected_rows() != 1)
            throw lease_lost("idem: operation " + s.key_hash + " was taken over by a newer run before it completed");
    });
}

void steps::abandon() noexcept {
    detail::steps_state& s = *state_;
    try {
        s.db->transact([&](unit_of_work& uow) {
            uow.sql() << "UPDATE idem_operations SET expires_at = " + s.now + ", updated_at = " + s.now +
                             " WHERE record_id = :id AND fence = :fence AND state = 0",
                soci::use(s.record_id), soci::use(s.fence);
        });
    } catch (...) {
        // The lease then ends when it would have; a retry resumes after it.
    }
}

steps database::start_steps(const record_key& key, std::string_view fingerprint, const execution_options& options) {
    if (fingerprint.empty()) throw std::invalid_argument("idem: the fingerprint is empty");
    const resolved_options resolved = executor().options().resolve(options);
    auto state = std::make_unique<detail::steps_state>();
    detail::steps_state& s = *state;
    s.db = this;
    s.record_id = detail::hex(detail::record_id(key.digest()));
    s.key_hash = key.key_hash();
    s.name_space = key.name_space();
    s.fingerprint = detail::hex_of(fingerprint);
    s.lease_ms = detail::millis(resolved.lease);
    s.retention_ms = detail::millis(resolved.retention);
    s.failure_retention_ms = detail::millis(resolved.failure_retention);
    if (backend() == database_url::backend::postgresql) {
        s.now = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";
        s.lock = " FOR UPDATE";
    } else {
        s.now = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
    }
    transact([&](unit_of_work& uow) {
        soci::session& sql = uow.sql();
        s.decision = execution_status::executed;
        s.stored_result.clear();
        s.fence = 1;
        s.recovery_point = 0;
        soci::statement insert =
            (sql.prepare << "INSERT INTO idem_operations (record_id, namespace, fingerprint, fence, recovery_point, "
                            "state, expires_at, updated_at) VALUES (:id, :ns, :fp, 1, 0, 0, " +
                                s.now + " + :lease, " + s.now + ") ON CONFLICT (record_id) DO NOTHING",
             soci::use(s.record_id), soci::use(s.name_space), soci::use(s.fingerprint), soci::use(s.lease_ms));
        insert.execute(true);
        if (insert.get_affected_rows() == 1) return;

        std::string stored_fingerprint, result;
        long long fence = 0, expires_at = 0, now = 0;
        int recovery_point = 0, completed = 0;
        soci::indicator result_null = soci::i_ok;
        sql << "SELECT fingerprint, fence, recovery_point, state, result, expires_at, " + s.now +
                   " FROM idem_operations WHERE record_id = :id" + s.lock,
            soci::into(stored_fingerprint), soci::into(fence), soci::into(recovery_point), soci::into(completed),
            soci::into(result, result_null), soci::into(expires_at), soci::into(now), soci::use(s.record_id);
        const bool live = expires_at > now;
        if (completed == 1 && live) {
            if (stored_fingerprint != s.fingerprint) {
                s.decision = execution_status::key_reused;
            } else {
                s.decision = execution_status::replayed;
                s.stored_result = detail::bytes_of(result_null == soci::i_ok ? result : std::string());
            }
            return;
        }
        // Unfinished work belongs to the request that started it, live or not.
        if (completed == 0 && stored_fingerprint != s.fingerprint) {
            s.decision = execution_status::key_reused;
            return;
        }
        if (completed == 0 && live) {
            s.decision = execution_status::in_flight;
            return;
        }
        if (completed == 1) {  // its retention ended: a new operation under the key
            sql << "DELETE FROM idem_steps WHERE record_id = :id", soci::use(s.record_id);
            recovery_point = 0;
        }
        // A takeover: the fence moves on, so the run before it can write no step more.
        const long long taken = fence + 1;
        sql << "UPDATE idem_operations SET fingerprint = :fp, fence = :fence, recovery_point = :point, state = 0, "
               "result = NULL, expires_at = " +
                   s.now + " + :lease, updated_at = " + s.now + " WHERE record_id = :id",
            soci::use(s.fingerprint), soci::use(taken), soci::use(recovery_point), soci::use(s.lease_ms),
            soci::use(s.record_id);
        s.fence = taken;
        s.recovery_point = static_cast<std::size_t>(recovery_point);
    });
    return idem::steps(std::move(state));
}

}  // namespace idem
