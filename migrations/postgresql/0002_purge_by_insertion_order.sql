-- Completing a record touches no index, so PostgreSQL writes the completed
-- version beside the old one on the same page (a HOT update) instead of adding
-- index entries: the expires_at index, whose entry moved when a lease became a
-- retention, gives way to one on inserted_at, written once, when the row is
-- inserted, at the right edge of its index (the current time).
--
-- Purging walks rows in insertion order, oldest first, and deletes the expired
-- ones: rows expire roughly in the order they were inserted.
--
-- Existing rows get -infinity, an instant before every row written later,
-- without rewriting the table; rows inserted from now on get the database's clock.
ALTER TABLE idem_records ADD COLUMN inserted_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE idem_records ALTER COLUMN inserted_at SET DEFAULT clock_timestamp();
CREATE INDEX idem_records_inserted_at ON idem_records (inserted_at);
DROP INDEX idem_records_expires_at;
-- Room on each page for the completed versions of the rows inserted there.
ALTER TABLE idem_records SET (fillfactor = 90);
