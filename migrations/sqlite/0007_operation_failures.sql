-- What the completer needs to decide when an operation in steps compensates.
--
-- failures: runs of the completer whose operation (or its takeover) threw,
-- a lost lease and a transient database failure aside; after the operation's
-- compensate_after of them it compensates instead. A run that died (a
-- SIGKILL, a lost connection) is no failure: completions counts it, this does not.
-- compensates: whether the operation registered a compensation when it began
-- (1) or not (0: database::steps, an idem::operation without one), so that
-- idem complete --compensate can refuse one it could never undo; NULL for one
-- begun before this column.
ALTER TABLE idem_operations ADD COLUMN failures INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0);
ALTER TABLE idem_operations ADD COLUMN compensates INTEGER CHECK (compensates IN (0, 1));
