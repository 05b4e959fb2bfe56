// Every statement idem sends to the outbox's tables (idem_outbox and
// idem_outbox_intake, migrations/<dialect>/NNNN_outbox*.sql), as one dialect
// writes them. outbox_table.cpp decides the order of the work (take in,
// claim, set aside, settle) and binds the values; each store's dialect fills
// this in its own SQL (stores/<dialect>/<dialect>_outbox_sql.cpp).
//
// The contract of each text is the names it binds (SOCI binds by name and
// refuses a name the text does not use) and the columns it returns, in
// order. Bytes (headers, payload) travel as the dialect says
// (sql_dialect::bytes_as_hex): a text that takes or returns them converts
// them itself. Times are BIGINT milliseconds since the epoch. A field marked
// optional may be empty: that step has no statement in this dialect.
#pragma once

#include <string>

namespace idem::detail {

struct outbox_statements {
    // Optional, run first in every transaction of the relay's (claim, settle,
    // count, purge): how the database should plan and commit queue work.
    std::string queue_settings;

    // Publishing. :id :topic :ordering_key :headers :payload :created.
    std::string insert;
    // Optional: the same INSERT left to the COMMIT on the fast path
    // (fast_path.hpp), its parameters numbered $1..$6 in that order.
    std::string insert_at_commit;

    // Taking in (outbox_table::claim). Optional: a query returning one row
    // of one integer, 1 when this transaction may take in (and holds that
    // right until COMMIT), 0 when another is taking in now.
    std::string intake_lock;
    // Either one statement that moves up to :n of the intake's first rows
    // into the outbox (skipping ids already there) and returns how many left
    // the intake and how many came in, two BIGINTs ...
    std::string take_in;
    // ... or, when take_in is empty, three that see the same rows: the last
    // seq and the count of the first :n rows (MAX NULL when there are none),
    // the copy of those up to :last (its affected rows: how many came in)
    // and their deletion (:last).
    std::string intake_range;
    std::string intake_copy;
    std::string intake_remove;

    // Claiming. The first :n due messages (available_at <= :now, in the
    // order they came due) that no earlier undelivered message of their key
    // holds back, passing over rows other relays hold, taken for :token
    // until :until with their attempts up by one; returns seq, id, topic,
    // ordering_key, headers, payload, attempts (after the increment),
    // created_at. Where one statement cannot both take and return rows,
    // take_free only selects and locks them (:now :n, the same columns, the
    // attempts it returns already counting this one) and mark_taken takes
    // each (:until :token :id).
    std::string take_free;
    std::string mark_taken;
    // Sets messages that will go on waiting aside until :until (see
    // outbox_table.cpp): :until :now :window :stalled_at :in_flight_at.
    std::string set_aside;

    // The slow path for an id met again (take_in_one_by_one). Its rows: :n →
    // seq, id, topic, ordering_key, headers, payload, created_at.
    std::string intake_rows;
    // :id → topic, ordering_key, headers, payload.
    std::string find_message;
    // :id :topic :ordering_key :headers :payload :created :available :state :done :answer.
    std::string insert_message;
    // :seq.
    std::string remove_intake_row;

    // Settling a claim. One message retried or dead: :state :due :answer :done :id :token.
    std::string settle_one;
    // The rest of the claim delivered: :at :until :token.
    std::string settle_rest;
    // The next message of each key delivered at :delivered, set aside after
    // :set_aside and not claimed since, due at :due (:later repeats :due's instant).
    std::string release_next;

    // Dead letters back to pending: :at (requeue_all), :at :id (requeue_one).
    std::string requeue_all;
    std::string requeue_one;
    // The pending and dead counts and the oldest pending message's
    // created_at (NULL when none) in the outbox; then the intake's count and
    // its first message's created_at (NULL when empty).
    std::string count;
    std::string count_intake;
    // Deletes up to :n messages delivered at or before :before, oldest first.
    std::string purge;
    // How many a purge would delete: :before → one BIGINT.
    std::string count_delivered;
    // Whether the outbox's migration ran: one BIGINT, above 0 when it did.
    std::string exists;
    // :n → id, topic, attempts, last_answer (NULL when none), in publication order.
    std::string dead_letters;
};

}  // namespace idem::detail
