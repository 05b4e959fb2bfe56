#include "sql/unnamed_statement.hpp"

namespace idem::detail {

void prepare_statement(soci::statement& st, const std::string& text, bool named) {
    st.alloc();
    st.prepare(text, named ? soci::details::st_repeatable_query : soci::details::st_one_time_query);
    st.define_and_bind();
}

bool execute_kept(soci::statement& st) {
    try {
        return st.execute(true);
    } catch (...) {
        st.undefine_and_bind();  // the use elements' clean_up: what a run that succeeds does after it
        throw;
    }
}

}  // namespace idem::detail
