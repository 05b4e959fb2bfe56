// How idem's own SOCI statements reach the server. SOCI names what
// sql.prepare, soci::statement::prepare and rowset prepare (st_1, st_2, ...
// per session), and PostgreSQL keeps a named statement on its server
// connection until DEALLOCATE, whatever the transaction does. Behind a pooler
// in transaction mode that breaks: a statement run outside the transaction
// that prepared it may land on another server connection (SQLSTATE 26000),
// and a name that a killed client, or a DEALLOCATE refused in an aborted
// transaction, left on a server connection fails the next client's PREPARE
// of it (42P05). A statement run once gains nothing from a name anyway (a
// PREPARE, an EXECUTE and a DEALLOCATE instead of one round trip), so idem
// sends those unnamed, as `sql << ...` does; a statement kept on its
// connection for later transactions is named only where the connection keeps
// statements (sql_transaction::keeps_statements: not behind such a pooler),
// and runs there through execute_kept.
//
//   soci::statement update = unnamed_statement(sql, "UPDATE t SET n = :n WHERE id = :id", soci::use(n),
//                                              soci::use(id));
//   update.execute(true);
//   if (update.get_affected_rows() != 1) ...
#pragma once

#include <soci/soci.h>

#include <string>
#include <utility>

#include "idem/export.hpp"

namespace idem::detail {

// Prepares `st`, its use and into elements exchanged, to run `text`: named on
// the server when `named`, else sent with its parameters on every execute.
IDEM_API void prepare_statement(soci::statement& st, const std::string& text, bool named = false);

// Runs `st`, a statement kept to run again, as st.execute(true) does. SOCI's
// PostgreSQL backend frees a run's parameter text after the run succeeds; after
// one that throws, it is freed here, or the next run would leak it and, for a
// parameter then NULL, send it again. The statement itself stays: destroyed
// in the failed transaction, it would stay prepared on the server (its
// DEALLOCATE refused there).
bool execute_kept(soci::statement& st);

// A statement of `text` with these use and into elements (soci::use, soci::into), sent unnamed.
template <class... Elements>
[[nodiscard]] soci::statement unnamed_statement(soci::session& sql, const std::string& text, Elements&&... elements) {
    soci::statement st(sql);
    (st.exchange(std::forward<Elements>(elements)), ...);
    prepare_statement(st, text);
    return st;
}

}  // namespace idem::detail
