-- Purging walks rows in expiry order again, through an index on expires_at,
-- and stops at the first row still live: a purge reads the rows it deletes and
-- no others. Walking insertion order (0002) found the expired rows at the
-- front, but its last batch read every live row to learn that none was left
-- (seconds per run for ten million rows, the whole table's pages at a
-- retention's worth of rows).
--
-- The cost moves to the completion of a reservation made first (lease mode,
-- Observe, a caller's own transaction): its new expiry is an index entry, so
-- that update is no longer HOT. Enforce in a transaction the executor opens
-- writes its record once, completed, and pays nothing more.
CREATE INDEX idem_records_expires_at ON idem_records (expires_at);
DROP INDEX idem_records_inserted_at;
