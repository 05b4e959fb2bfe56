-- Operations in steps (idem::database::steps). One row per operation, keyed
-- by the record's id (lowercase hex of the first 16 bytes of the record key's
-- SHA-256 digest), and one row per stored step. Results are kept as lowercase
-- hex text, so every byte (NUL, invalid UTF-8) survives any driver.
--
-- Independent of idem_records: an operation's lease, fencing token and
-- recovery point live here, in the same transaction as each step's result.
CREATE TABLE idem_operations (
    record_id      TEXT    NOT NULL PRIMARY KEY CHECK (length(record_id) = 32),
    namespace      TEXT    NOT NULL,
    fingerprint    TEXT    NOT NULL,  -- hex of the caller's fingerprint
    -- The fencing token: every run that takes the operation over adds one, and a
    -- step commits only while the operation still carries its run's token.
    fence          INTEGER NOT NULL CHECK (fence > 0),
    recovery_point INTEGER NOT NULL CHECK (recovery_point >= 0),  -- the position after the last stored step
    state          INTEGER NOT NULL CHECK (state IN (0, 1)),  -- 0 running, 1 completed
    result         TEXT    CHECK (state = 0 OR result IS NOT NULL),  -- hex of the final result
    -- Milliseconds since the Unix epoch on the database's clock: the lease's end
    -- while running, the retention's once completed.
    expires_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE idem_steps (
    record_id  TEXT    NOT NULL,
    step_index INTEGER NOT NULL CHECK (step_index >= 0),
    name       TEXT    NOT NULL,
    kind       INTEGER NOT NULL CHECK (kind IN (0, 1)),   -- 0 step (one transaction), 1 call (outside any)
    state      INTEGER NOT NULL CHECK (state IN (0, 1)),  -- 0 call made, no answer stored; 1 result stored
    result     TEXT    CHECK (state = 0 OR result IS NOT NULL),
    attempts   INTEGER NOT NULL CHECK (attempts > 0),     -- runs of the step's transaction, or calls made
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (record_id, step_index)
) WITHOUT ROWID;
