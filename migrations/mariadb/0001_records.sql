-- idem's records on MariaDB: the final shape of idem_records and
-- idem_tombstones (PostgreSQL and SQLite reached it through several
-- migrations; a MariaDB database starts from it).
--
-- MariaDB commits each DDL statement as it runs, so a migration is not one
-- transaction: every statement here is safe to run again (IF NOT EXISTS), and
-- a migration that failed half way runs again whole. Comments stand on lines
-- of their own, and no statement holds a colon or a semicolon: the store sends
-- the script a statement at a time, through SOCI, which reads ":name" as a
-- parameter.
--
-- Every table names its engine, character set and collation rather than take
-- the server's or the database's defaults: utf8mb4_nopad_bin compares text
-- byte for byte, with no padding, so 'abc', 'ABC' and 'abc ' are three values
-- (a PAD SPACE collation such as utf8mb4_bin holds 'abc' and 'abc ' equal, a
-- case-insensitive one 'abc' and 'ABC').
--
-- One row per record key. The primary key is the first 16 bytes of the
-- SHA-256 of the record key's storage key (record_key::digest()), compared as
-- bytes. Among n records the chance that two share a 128-bit prefix is below
-- n^2 / 2^129. Rows carry no key or scope text: the digest finds a record
-- (`idem key` computes it from the key), namespace tells an operator which
-- operation a row is for, and scope_id (the first 8 bytes of the SHA-256 of
-- the scope's text, NULL for none) lists what one scope completed.
--
-- token and fingerprint are bytes, compared as bytes. state is 0 in flight,
-- 1 completed; payload is the stored result. Times are milliseconds since the
-- Unix epoch on the database's clock: the entry is absent once
-- expires_at <= now (the lease while in flight, the retention once
-- completed). The purge walks expired rows in expiry order, through the
-- expires_at index, which the listing of what completed since a time reads too.
CREATE TABLE IF NOT EXISTS idem_records (
    key_hash    BINARY(16)      NOT NULL,
    namespace   VARCHAR(256)    NOT NULL,
    fingerprint VARBINARY(1024) NOT NULL,
    token       VARBINARY(255)  NOT NULL,
    state       TINYINT         NOT NULL,
    payload     LONGBLOB,
    expires_at  BIGINT          NOT NULL,
    updated_at  BIGINT          NOT NULL,
    scope_id    BINARY(8),
    PRIMARY KEY (key_hash),
    KEY idem_records_expires_at (expires_at),
    CONSTRAINT idem_records_token CHECK (LENGTH(token) > 0),
    CONSTRAINT idem_records_state CHECK (state IN (0, 1)),
    CONSTRAINT idem_records_payload CHECK (state = 0 OR payload IS NOT NULL)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- Remembered keys (profile_options::remember): a key whose result was stored
-- under a profile with a remembered window keeps a tombstone here, written
-- with its result in the same transaction, until the window ends. No payload
-- and no key text: the key hash, a digest of the fingerprint (the first 16
-- bytes of its SHA-256) and the time the key may be forgotten (milliseconds
-- since the Unix epoch on the database's clock: the tombstone answers while
-- forget_at > now). The purge deletes tombstones whose window ended, through
-- the forget_at index, after the expired records.
CREATE TABLE IF NOT EXISTS idem_tombstones (
    key_hash    BINARY(16) NOT NULL,
    fingerprint BINARY(16) NOT NULL,
    forget_at   BIGINT     NOT NULL,
    PRIMARY KEY (key_hash),
    KEY idem_tombstones_forget_at (forget_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
