// Failures the SQL-store contract suite injects into PostgreSQL, by triggers
// that raise: on completed-record writes of one session, or on every delete.
#pragma once

#include <soci/soci.h>

namespace idem::test::pg_refusals {

// The trigger is the database's, so a session setting limits it to this session.
inline void refuse_completed_records(soci::session& session) {
    session << R"(CREATE OR REPLACE FUNCTION refuse_results() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.completed AND current_setting('test.refuse_results', true) = 'on' THEN
                RAISE EXCEPTION 'refused';
            END IF;
            RETURN NEW;
        END $$)";
    session << "CREATE TRIGGER refuse_results BEFORE INSERT OR UPDATE ON idem_records"
               " FOR EACH ROW EXECUTE FUNCTION refuse_results()";
    session << "SET test.refuse_results = 'on'";
}

inline void accept_completed_records(soci::session& session) {
    session << "SET test.refuse_results = 'off'";
    session << "DROP TRIGGER refuse_results ON idem_records";
}

// Every session's deletes: the detached view deletes on the store's own.
inline void refuse_deleting_records(soci::session& session) {
    session << R"(CREATE OR REPLACE FUNCTION refuse_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'refused';
        END $$)";
    session << "CREATE TRIGGER refuse_deletes BEFORE DELETE ON idem_records"
               " FOR EACH ROW EXECUTE FUNCTION refuse_deletes()";
}

inline void accept_deleting_records(soci::session& session) {
    session << "DROP TRIGGER refuse_deletes ON idem_records";
}

}  // namespace idem::test::pg_refusals
