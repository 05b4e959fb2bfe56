-- The transactional outbox: messages a unit of work publishes (uow.publish),
-- written in its transaction, delivered by idem::outbox_relay. Safe to run
-- again, as every MariaDB migration (see 0001_records).
--
-- A published message goes to the intake, idem_outbox_intake: one row
-- appended to the end of its primary key, in the business transaction. The
-- relay's next claim moves a batch of them into idem_outbox, in seq order,
-- each getting its seq there as it comes in (above every row already in). A
-- message whose id is in idem_outbox already (the same record's work run again
-- after its record expired) is not dropped silently: the claim sees fewer come
-- in than it took, and looks at each (see outbox_table.cpp).
--
-- seq is the order of publication: a message with an ordering key is
-- delivered only once every earlier message of that key is (state 1). Relays
-- claim batches with FOR UPDATE SKIP LOCKED (a fleet shares the work) by
-- raising attempts and pushing available_at to the end of a lease, under a
-- claim token of their own; a relay that dies mid-batch loses nothing, its
-- claims come due again when the lease ends. state is 0 pending, 1 delivered,
-- 2 dead; created_at, available_at (when it may be tried again) and done_at
-- (when it was delivered or dead-lettered) are milliseconds since the Unix
-- epoch; last_answer is what the sink said last time (a dead letter keeps it).
-- The topic and the ordering key are 1 to 255 bytes of UTF-8; ids are idem's
-- UUIDs.
--
-- MariaDB has no partial index: an index leads with state where the
-- PostgreSQL one has a WHERE on it, or is on a column of its own.
-- - idem_outbox_due: what a claim reads, the due messages (state 0) in the
--   order they came due; the backlog's count and lag read the pending rows
--   through it too.
-- - idem_outbox_ordering: a key's undelivered messages (pending or dead) in
--   publication order, to find whether an earlier one is still undelivered,
--   the first, the one before, the next. Its column, undelivered_key, is the
--   ordering key while the message is undelivered, NULL once delivered (and
--   for a message without a key): PostgreSQL's index on (ordering_key, seq)
--   WHERE state <> 1. An index on (ordering_key, seq) would read past every
--   delivered message of the key until the purge deletes them, and one on
--   (ordering_key, state, seq) in no single order.
-- - idem_outbox_delivered: the purge takes delivered rows (state 1) in the
--   order they were delivered, settling finds a key's next message through
--   the rows delivered at one instant, and dead letters (state 2) are counted
--   and requeued through it.
-- seq is the primary key: InnoDB appends each new row to the end of the
-- table, and every secondary index holds seq already.
CREATE TABLE IF NOT EXISTS idem_outbox (
    seq             BIGINT       NOT NULL AUTO_INCREMENT,
    id              VARCHAR(255) NOT NULL,
    topic           VARCHAR(255) NOT NULL,
    ordering_key    VARCHAR(255),
    headers         LONGBLOB     NOT NULL,
    payload         LONGBLOB     NOT NULL,
    state           TINYINT      NOT NULL DEFAULT 0,
    attempts        INT          NOT NULL DEFAULT 0,
    created_at      BIGINT       NOT NULL,
    available_at    BIGINT       NOT NULL,
    done_at         BIGINT,
    claim           VARCHAR(255),
    last_answer     TEXT,
    undelivered_key VARCHAR(255) AS (CASE WHEN state <> 1 THEN ordering_key END) STORED,
    PRIMARY KEY (seq),
    UNIQUE KEY idem_outbox_id (id),
    KEY idem_outbox_due (state, available_at, seq),
    KEY idem_outbox_ordering (undelivered_key, seq),
    KEY idem_outbox_delivered (state, done_at),
    CONSTRAINT idem_outbox_state CHECK (state IN (0, 1, 2))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- What was published and not yet taken in, in publication order (seq), with
-- no index but its primary key: a claim takes the first rows of it.
CREATE TABLE IF NOT EXISTS idem_outbox_intake (
    seq          BIGINT       NOT NULL AUTO_INCREMENT,
    id           VARCHAR(255) NOT NULL,
    topic        VARCHAR(255) NOT NULL,
    ordering_key VARCHAR(255),
    headers      LONGBLOB     NOT NULL,
    payload      LONGBLOB     NOT NULL,
    created_at   BIGINT       NOT NULL,
    PRIMARY KEY (seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- The right to take in: one row, which a claim locks (FOR UPDATE SKIP LOCKED)
-- before it takes the intake's first rows, and holds until its COMMIT. Claims
-- take in one after the other, so what one takes in comes after what the one
-- before it did; a claim that finds the row held claims what is in already.
-- The row is in the database, so two applications' outboxes in two databases
-- of one server do not wait for each other.
CREATE TABLE IF NOT EXISTS idem_outbox_lock (
    id TINYINT NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT idem_outbox_lock_one CHECK (id = 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

INSERT IGNORE INTO idem_outbox_lock (id) VALUES (1);
