-- A claim reads the due messages in the order they came due, through an index
-- of their own over the pending rows, and stops once it has its batch:
-- messages claimed by another relay, backing off, or set aside behind an
-- earlier message of their key are not due, so it never reads them. Before,
-- it read the pending rows in publication order and passed over each of those
-- every time (one key with a long queue made every claim read all of it).
CREATE INDEX idem_outbox_due ON idem_outbox (available_at, seq) WHERE state = 0;
