-- A cheaper publish: one index fewer for each message written. The due index
-- covers the same rows as the pending one (state = 0) and holds seq: the
-- oldest pending message (the lag) is found through it, in the pass that
-- counts them, and nothing else read this one.
DROP INDEX idem_outbox_pending;
