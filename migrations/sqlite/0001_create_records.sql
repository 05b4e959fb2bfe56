-- One row per record key. The primary key is the SHA-256 of the record key's
-- storage key (record_key::digest()), compared as bytes: no collation can merge
-- two keys that differ in case or trailing spaces. namespace, scope and key are
-- there for people reading the table; lookups never use them.
CREATE TABLE idem_records (
    key_hash    BLOB    NOT NULL PRIMARY KEY CHECK (length(key_hash) = 32),
    namespace   TEXT    NOT NULL,
    scope       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint BLOB    NOT NULL,
    token       TEXT    NOT NULL CHECK (token <> ''),
    state       INTEGER NOT NULL CHECK (state IN (0, 1)),  -- 0 in flight, 1 completed
    payload     BLOB    CHECK (state = 0 OR payload IS NOT NULL),
    -- Milliseconds since the Unix epoch on the store's clock. The entry is
    -- absent once expires_at <= now: the lease while in flight, the retention
    -- once completed.
    expires_at  INTEGER NOT NULL CHECK (typeof(expires_at) = 'integer'),
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- purge_expired walks expired rows in expiry order.
CREATE INDEX idem_records_expires_at ON idem_records (expires_at);
