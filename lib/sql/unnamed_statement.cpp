#include "sql/unnamed_statement.hpp"

namespace idem::detail {

void prepare_statement(soci::statement& st, const std::string& text, bool named) {
    st.alloc();
    st.prepare(text, named ? soci::details::st_repeatable_query : soci::details::st_one_time_query);
    st.define_and_bind();
}

}  // namespace idem::detail
