-- One row per record key. The primary key is the SHA-256 of the record key's
-- storage key (record_key::digest()), compared as bytes: no collation can merge
-- two keys that differ in case or trailing spaces. namespace, scope and key are
-- there for people reading the table, in the binary "C" collation; lookups
-- never use them.
CREATE TABLE idem_records (
    key_hash    bytea       NOT NULL PRIMARY KEY CHECK (octet_length(key_hash) = 32),
    namespace   text        COLLATE "C" NOT NULL,
    scope       text        COLLATE "C" NOT NULL,
    key         text        COLLATE "C" NOT NULL,
    token       bytea       NOT NULL CHECK (octet_length(token) > 0),
    fingerprint bytea       NOT NULL CHECK (octet_length(fingerprint) > 0),
    payload     bytea,
    completed   boolean     NOT NULL,
    -- The database's clock (clock_timestamp()) writes and reads both, so
    -- instances with skewed clocks agree. The entry is absent once
    -- expires_at <= clock_timestamp(): the lease while in flight, the
    -- retention once completed.
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CHECK (NOT completed OR payload IS NOT NULL)
);

-- Purging walks expired rows in expiry order, and counting them reads only the index.
CREATE INDEX idem_records_expires_at ON idem_records (expires_at);
