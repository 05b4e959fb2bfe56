-- The same transfer with the record statements written out by hand: the
-- minimal SQL for the same guarantee (a duplicate waits on the reservation,
-- the completion is fenced by its token), sent as idem's fast path sends its
-- own: the reservation in one pipeline with BEGIN, the completion with COMMIT
-- (5 round trips).
\set id random(1, 9000000000000000000)
\startpipeline
BEGIN;
INSERT INTO idem_records (key_hash, namespace, token, fingerprint, payload, completed, created_at, expires_at)
VALUES (substring(sha256(int8send(:id)) FROM 1 FOR 16), 'bench.transfer', '\x0123456789abcdef0123456789abcdef', '\x6670', NULL, false,
        clock_timestamp(), clock_timestamp() + interval '1 minute')
ON CONFLICT DO NOTHING RETURNING 1;
\endpipeline
UPDATE accounts SET balance = balance - 1 WHERE id = 'alice';
UPDATE accounts SET balance = balance + 1 WHERE id = 'bob';
INSERT INTO ledger (transfer_id, amount) VALUES (:id, 1);
\startpipeline
UPDATE idem_records SET payload = '\x6f6b', completed = true, expires_at = clock_timestamp() + interval '1 day'
WHERE key_hash = substring(sha256(int8send(:id)) FROM 1 FOR 16) AND token = '\x0123456789abcdef0123456789abcdef' AND NOT completed;
COMMIT;
\endpipeline
