-- Remembered keys (profile_options::remember): a key whose result was stored
-- under a profile with a remembered window keeps a tombstone here, written
-- with its result by the same statement, until the window ends. Once the
-- result is gone (its retention over), a retry with the same fingerprint is
-- answered expired instead of running again; another fingerprint is a
-- mismatch. No payload and no key text: the key hash, a digest of the
-- fingerprint (the first 16 bytes of its SHA-256) and the time the key may be
-- forgotten, on the database clock. The purge deletes tombstones whose window
-- ended, through the forget_at index, after the expired records.
--
-- A new table: a process running the previous version keeps working, and
-- neither writes nor reads tombstones (its retries after retention run again,
-- as before).
CREATE TABLE idem_tombstones (
    key_hash    bytea       NOT NULL PRIMARY KEY CHECK (octet_length(key_hash) = 16),
    fingerprint bytea       NOT NULL CHECK (octet_length(fingerprint) = 16),
    forget_at   timestamptz NOT NULL
);

CREATE INDEX idem_tombstones_forget_at ON idem_tombstones (forget_at);
