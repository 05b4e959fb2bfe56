-- The transactional outbox: messages a unit of work publishes (uow.publish),
-- written in its transaction, delivered by idem::outbox_relay.
--
-- seq is the order of publication: a message with an ordering key is
-- delivered only once every earlier message of that key is (state 1).
-- A relay claims a message by raising attempts and pushing available_at to
-- the end of its lease, under a claim token of its own; a relay that dies
-- mid-batch loses nothing, its claims come due again when the lease ends.
CREATE TABLE idem_outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT    NOT NULL UNIQUE,
    topic        TEXT    NOT NULL,
    ordering_key TEXT,
    headers      BLOB    NOT NULL,
    payload      BLOB    NOT NULL,
    state        INTEGER NOT NULL DEFAULT 0 CHECK (state IN (0, 1, 2)),  -- 0 pending, 1 delivered, 2 dead
    attempts     INTEGER NOT NULL DEFAULT 0,
    -- Milliseconds since the Unix epoch: when it was published, when it may be
    -- tried (again), and when it was delivered or dead-lettered.
    created_at   INTEGER NOT NULL,
    available_at INTEGER NOT NULL,
    done_at      INTEGER,
    claim        TEXT,
    last_answer  TEXT  -- what the sink said last time (a dead letter keeps it)
);
-- What a relay claims next, in order of publication, without reading
-- delivered rows; the oldest pending message (the lag) too.
CREATE INDEX idem_outbox_pending ON idem_outbox (seq) WHERE state = 0;
-- Dead letters, to count and re-queue.
CREATE INDEX idem_outbox_dead ON idem_outbox (seq) WHERE state = 2;
-- Whether an earlier message of a key is still undelivered.
CREATE INDEX idem_outbox_ordering ON idem_outbox (ordering_key, seq) WHERE state <> 1 AND ordering_key IS NOT NULL;
-- The purge job takes delivered rows in the order they were delivered.
CREATE INDEX idem_outbox_delivered ON idem_outbox (done_at) WHERE state = 1;
