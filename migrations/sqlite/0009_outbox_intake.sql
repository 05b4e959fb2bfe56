-- A cheaper publish: a published message goes to the intake, a table with no
-- index, and the relay's next claim moves it into idem_outbox. Every page a
-- transaction changes is a page its COMMIT appends to the WAL and syncs; a
-- message written to idem_outbox changed four (its row's, and its id's, due
-- and ordering key's index entries, two of them at random places), one in
-- the intake changes one, the last page of a table that stays small.
--
-- seq is the order of publication here as in idem_outbox: a claim takes the
-- intake's rows in seq order, and each gets its seq in idem_outbox as it
-- comes in, above every row there. A message whose id is in idem_outbox
-- already (the same record's work run again after its record expired) is
-- dropped as it comes in, as publishing it there would have dropped it.
CREATE TABLE idem_outbox_intake (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL,
    topic        TEXT    NOT NULL,
    ordering_key TEXT,
    headers      BLOB    NOT NULL,
    payload      BLOB    NOT NULL,
    created_at   INTEGER NOT NULL  -- milliseconds since the Unix epoch
);
