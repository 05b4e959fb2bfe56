-- Each record's scope id: the first 8 bytes of the SHA-256 of its scope's
-- text (scope::text()), written with the row, so that an operator can list
-- what one scope (a tenant, a user) completed (`idem inspect --namespace NS
-- --since T --tenant ID`). Never the scope's text: rows hold no key or scope
-- text.
--
-- A column that may be NULL, added without a rewrite of the table: a process
-- running the previous version keeps working and writes none; such rows, and
-- rows written before this migration, are listed only without a scope.
ALTER TABLE idem_records ADD COLUMN scope_id bytea;
