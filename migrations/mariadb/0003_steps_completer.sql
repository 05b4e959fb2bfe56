-- Operations in steps (idem::database::steps) and what the completer
-- (idem::completer) needs to finish one that no run finishes: the final shape
-- of idem_operations and idem_steps. Safe to run again, as every MariaDB
-- migration (see 0001_records). Its name ends in _completer: idem looks for
-- that migration to know the tables are there.
--
-- One row per operation, keyed by the record's id (lowercase hex of the first
-- 16 bytes of the record key's SHA-256 digest), and one row per stored step.
-- Fingerprints, inputs and results are kept as lowercase hex text, so every
-- byte (NUL, invalid UTF-8) survives any driver. Independent of idem_records:
-- an operation's lease, fencing token and recovery point live here, in the
-- same transaction as each step's result.
--
-- fence: the fencing token; every run that takes the operation over adds one,
-- and a step commits only while the operation still carries its run's token.
-- recovery_point: the position after the last stored step. state: 0 running,
-- 1 completed. expires_at: milliseconds since the Unix epoch on the
-- database's clock, the lease's end while running, the retention's once
-- completed. input: hex of the bytes the operation began with, so the
-- completer can run it again. completions: runs the completer took it over
-- for. compensate_from: once it compensates, the position of its first
-- compensation step. last_error: what the completer's last failed run threw
-- (at most 1 KiB of printable ASCII). failures: runs of the completer whose
-- operation threw. compensates: whether it registered a compensation when it
-- began (1) or not (0).
--
-- idem_operations_by_expiry finds running operations whose lease ended (the
-- completer's) and completed ones whose retention ended (the purge's), oldest
-- first.
CREATE TABLE IF NOT EXISTS idem_operations (
    record_id       VARCHAR(32)  NOT NULL,
    namespace       VARCHAR(256) NOT NULL,
    fingerprint     TEXT         NOT NULL,
    fence           BIGINT       NOT NULL,
    recovery_point  INT          NOT NULL,
    state           TINYINT      NOT NULL,
    result          LONGTEXT,
    expires_at      BIGINT       NOT NULL,
    updated_at      BIGINT       NOT NULL,
    input           LONGTEXT,
    completions     INT          NOT NULL DEFAULT 0,
    compensate_from INT,
    last_error      TEXT,
    failures        INT          NOT NULL DEFAULT 0,
    compensates     TINYINT,
    PRIMARY KEY (record_id),
    KEY idem_operations_by_expiry (state, expires_at),
    CONSTRAINT idem_operations_record_id CHECK (CHAR_LENGTH(record_id) = 32),
    CONSTRAINT idem_operations_fence CHECK (fence > 0),
    CONSTRAINT idem_operations_recovery_point CHECK (recovery_point >= 0),
    CONSTRAINT idem_operations_state CHECK (state IN (0, 1)),
    CONSTRAINT idem_operations_result CHECK (state = 0 OR result IS NOT NULL),
    CONSTRAINT idem_operations_completions CHECK (completions >= 0),
    CONSTRAINT idem_operations_compensate_from CHECK (compensate_from >= 0),
    CONSTRAINT idem_operations_failures CHECK (failures >= 0),
    CONSTRAINT idem_operations_compensates CHECK (compensates IN (0, 1))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

-- A step: kind 0 a step (one transaction), 1 a call (outside any); state 0 a
-- call made and no answer stored, 1 its result stored; attempts: runs of the
-- step's transaction, or calls made.
CREATE TABLE IF NOT EXISTS idem_steps (
    record_id  VARCHAR(32) NOT NULL,
    step_index INT         NOT NULL,
    name       TEXT        NOT NULL,
    kind       TINYINT     NOT NULL,
    state      TINYINT     NOT NULL,
    result     LONGTEXT,
    attempts   INT         NOT NULL,
    updated_at BIGINT      NOT NULL,
    PRIMARY KEY (record_id, step_index),
    CONSTRAINT idem_steps_step_index CHECK (step_index >= 0),
    CONSTRAINT idem_steps_kind CHECK (kind IN (0, 1)),
    CONSTRAINT idem_steps_state CHECK (state IN (0, 1)),
    CONSTRAINT idem_steps_result CHECK (state = 0 OR result IS NOT NULL),
    CONSTRAINT idem_steps_attempts CHECK (attempts > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
