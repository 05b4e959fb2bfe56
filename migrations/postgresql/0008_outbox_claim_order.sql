-- A claim reads the due messages in the order they came due, through an index
-- of their own over the pending rows, and stops once it has its batch:
-- messages claimed by another relay, backing off, or set aside behind an
-- earlier message of their key are not due, so it never reads them. Before,
-- it read the pending rows in publication order and passed over each of those
-- every time (one key with a long queue made every claim read all of it).
CREATE INDEX idem_outbox_due ON idem_outbox (available_at, seq) WHERE state = 0;
-- A primary key on seq offered the planner a second way to read pending rows
-- in publication order (the oldest, for the lag): through every row, past
-- every delivered message. A queue table's statistics are stale as soon as
-- taken, and sometimes made it take that way. The message id, unique already,
-- becomes the primary key; seq, unique by its identity, stays indexed where it
-- is read, in the pending and the dead rows. Each update of a row maintains
-- one index fewer.
ALTER TABLE idem_outbox
    DROP CONSTRAINT idem_outbox_pkey,
    DROP CONSTRAINT idem_outbox_id_key,
    ADD CONSTRAINT idem_outbox_pkey PRIMARY KEY (id);
