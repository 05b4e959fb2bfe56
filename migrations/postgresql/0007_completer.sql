-- The completer (idem::completer): what it needs to finish an operation in
-- steps that no run finishes, and the indexes that find such operations and
-- the expired ones a purge deletes.
--
-- input: hex of the bytes the operation began with (op.input()), so the
-- completer can run it again without the request that began it.
-- completions: runs the completer took the operation over for; after the
-- operation's compensate_after of them it compensates instead.
-- compensate_from: set once it compensates: the position of its first
-- compensation step (the steps before it are the operation's own).
-- last_error: what the completer's last failed run threw.
ALTER TABLE idem_operations ADD COLUMN input text;
ALTER TABLE idem_operations ADD COLUMN completions integer NOT NULL DEFAULT 0 CHECK (completions >= 0);
ALTER TABLE idem_operations ADD COLUMN compensate_from integer CHECK (compensate_from >= 0);
ALTER TABLE idem_operations ADD COLUMN last_error text;

-- Running operations whose lease ended (the completer's), completed ones whose
-- retention ended (the purge's), oldest first.
CREATE INDEX idem_operations_by_expiry ON idem_operations (state, expires_at);
