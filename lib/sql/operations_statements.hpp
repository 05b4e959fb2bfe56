// Every statement idem sends to the tables of operations in steps
// (idem_operations and idem_steps, migrations/<dialect>/NNNN_steps.sql and
// NNNN_completer.sql), as one dialect writes them. A run's steps
// (database/steps.cpp) and what inspect, the completer, `idem complete` and
// the purge do (operations_table.cpp) decide the order of the work and bind
// the values; each store's dialect fills this in its own SQL
// (stores/<dialect>/<dialect>_operations_sql.cpp).
//
// The contract of each text is the names it binds (by name: SOCI refuses a
// name the text does not use) and the columns it returns, in order. Times
// are BIGINT milliseconds since the epoch on the database's own clock, so
// instances with skewed clocks agree: "now" in a comment below is that clock,
// read by the statement itself. Results, inputs and fingerprints are
// lowercase hex text. "Locked" means held until COMMIT where the dialect's
// writers are not serialised anyway (FOR UPDATE).
#pragma once

#include <string>

namespace idem::detail {

struct operations_statements {
    // Whether the completer's migration ran: one BIGINT, above 0 when it did.
    std::string exists;

    // An operation as inspect and the completer read it, :id → record_id,
    // namespace, state, fence, recovery_point, compensate_from, completions,
    // failures, expires_at, updated_at, now, input, result, last_error.
    std::string read_operation;
    // Its steps in order, :id → step_index, name, kind, state, attempts, result, updated_at.
    std::string read_steps;
    // Up to :n unfinished operations (state 0), the one whose lease ends
    // first first, of namespace :ns (and :ns2, the same), or of every
    // namespace when it is empty: the columns of read_operation.
    std::string unfinished;
    // The unfinished operations: their count, how many are overdue (NULL
    // when none), the earliest lease end (NULL when none), now.
    std::string count_unfinished;
    // Up to :n unfinished operations whose lease ended, of the namespaces
    // the text's "{namespaces}" is replaced with (":ns0, :ns1, ..."), the
    // longest ended first → record_id, namespace, failures.
    std::string due;

    // The purge: now - :older (the retention's cutoff); up to :n finished
    // operations whose retention ended by :before, oldest first, locked and
    // passing over those another transaction holds → record_id; then each
    // one's steps and row deleted (:id).
    std::string retention_cutoff;
    std::string expired;
    std::string delete_steps;
    std::string delete_operation;
    // How many a purge would delete: :older → one BIGINT.
    std::string count_expired;

    // An unfinished operation put off: its lease ends :wait from now,
    // last_error = :e, failures + :added; while it carries fence :fence
    // (put_off_fenced), or while no run holds it (put_off_expired: its lease
    // ended). Both bind :wait :e :added :id, the first :fence too.
    std::string put_off_fenced;
    std::string put_off_expired;
    // An operator's release: the unfinished operation locked, :id → fence,
    // compensates (NULL for one begun before the column); then its fence
    // moved on and its lease ended now (:id), with compensate_from set to
    // the position after its last stored step unless set (release_compensating:
    // :id2, the same, and :id).
    std::string lock_unfinished;
    std::string release;
    std::string release_compensating;

    // A run's own statements (database/steps.cpp).
    // The operation locked, :id → fence, state.
    std::string hold;
    // The recovery point moved to :point and the lease renewed for :lease
    // ms, under fence :fence, while unfinished: :point :lease :id :fence.
    std::string advance;
    // A step, :id :i → name, kind, state, result.
    std::string read_step;
    // :id :i :name :kind :state :result :attempts, updated now.
    std::string insert_step;
    // A call made again: its attempts up by one, :id :i.
    std::string call_again;
    // A call's answer stored, while unanswered: :result :id :i.
    std::string answer_call;
    // The result of the step named :name, stored, before position :before
    // (:before2, the same) unless :before is negative → result, step_index.
    std::string stored_by_name;
    // How many steps are stored: :id → one BIGINT.
    std::string count_stored;
    // The operation's row deleted under its fence: :id :fence.
    std::string delete_fenced;
    // The final result stored, its retention :retention ms from now, under
    // the fence, while unfinished: :result :point :retention :id :fence.
    std::string finish;
    // The lease ended now, under the fence, while unfinished: :id :fence.
    std::string abandon;
    // The operation as a run that may take it over reads it, locked, :id →
    // namespace, fingerprint, fence, recovery_point, state, result,
    // expires_at, now, input, compensate_from, completions, failures.
    std::string read_locked;
    // Taken over: :fence :completions :from (NULL: none) :lease :id.
    std::string take;
    // A new operation's row unless one has its id, fence 1, its lease :lease
    // ms from now: :id :ns :fp :lease :input :compensates. Returns one row
    // (one integer) when it inserted, none when a row has the id: affected
    // rows would not tell, where the driver counts the rows found.
    std::string begin;
    // A finished operation whose retention ended, made new under its key:
    // :fp :input :compensates :id.
    std::string renew;
    // The position after the last stored step (0 when none): :id → one BIGINT.
    std::string next_step_index;
    // How many steps before :from are stored: :id :from → one BIGINT.
    std::string count_stored_before;
};

}  // namespace idem::detail
