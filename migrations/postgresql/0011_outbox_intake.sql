-- A cheaper publish: a published message goes to the intake, and the relay's
-- next claim moves it into idem_outbox in one statement (DELETE ... RETURNING
-- feeding the INSERT: what leaves the intake is exactly what comes in). A
-- message written to idem_outbox inserted its row and its id's, due and
-- ordering key's index entries (two at random places in their indexes); one
-- in the intake inserts its row and its seq's entry, at the end of the one
-- index the intake has. That index is what a claim reads the intake by: the
-- rows it deleted stay in the table as dead ones until VACUUM, and a claim
-- that read the table whole read those every time (1.6 ms a claim after
-- 20,000 messages went through, the relay's costliest statement).
--
-- seq is the order of publication here as in idem_outbox: a claim takes the
-- intake's rows in seq order and each gets its seq in idem_outbox as it comes
-- in; claims take in one after the other (the rows they take are locked), so
-- what one takes in comes after what the one before it did. A message whose
-- id is in idem_outbox already (the same record's work run again after its
-- record expired) is dropped as it comes in, as publishing it there dropped it.
CREATE TABLE idem_outbox_intake (
    seq          BIGINT   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           TEXT     NOT NULL,
    topic        TEXT     NOT NULL,
    ordering_key TEXT,
    headers      BYTEA    NOT NULL,
    payload      BYTEA    NOT NULL,
    created_at   BIGINT   NOT NULL  -- milliseconds since the Unix epoch
);
