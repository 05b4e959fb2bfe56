-- Remembered keys (profile_options::remember): a key whose result was stored
-- under a profile with a remembered window keeps a tombstone here, written
-- with its result in the same transaction, until the window ends. Once the
-- result is gone (its retention over), a retry with the same fingerprint is
-- answered expired instead of running again; another fingerprint is a
-- mismatch. No payload and no key text: the key hash, a digest of the
-- fingerprint (the first 16 bytes of its SHA-256) and the time the key may be
-- forgotten. The purge deletes tombstones whose window ended, in forget_at
-- order, after the expired records.
--
-- A new table: a process running the previous version keeps working, and
-- neither writes nor reads tombstones (its retries after retention run again,
-- as before).
CREATE TABLE idem_tombstones (
    key_hash    BLOB    NOT NULL PRIMARY KEY CHECK (length(key_hash) = 16),
    fingerprint BLOB    NOT NULL CHECK (length(fingerprint) = 16),
    -- Milliseconds since the Unix epoch on the store's clock: the tombstone
    -- answers while forget_at > now.
    forget_at   INTEGER NOT NULL CHECK (typeof(forget_at) = 'integer')
) WITHOUT ROWID;

CREATE INDEX idem_tombstones_forget_at ON idem_tombstones (forget_at);
