-- The bare transfer, as bench/transfer_bank.hpp sends it: two balance updates
-- and a ledger line in one transaction (5 round trips).
\set id random(1, 9000000000000000000)
BEGIN;
UPDATE accounts SET balance = balance - 1 WHERE id = 'alice';
UPDATE accounts SET balance = balance + 1 WHERE id = 'bob';
INSERT INTO ledger (transfer_id, amount) VALUES (:id, 1);
COMMIT;
