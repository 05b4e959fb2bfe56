// The unit of work's mapped objects and session hooks, as the public templates
// reach them (idem/detail/mapped_session.hpp): each call finds the unit's
// state through its runner and hands over to the tracked objects.
#include "idem/detail/mapped_session.hpp"

#include <soci/soci.h>

#include <string>
#include <utility>

#include "idem/detail/unit_state.hpp"
#include "idem/error.hpp"
#include "idem/unit_of_work.hpp"
#include "sql/mapped_statements.hpp"
#include "sql/mapping_statements.hpp"
#include "sql/sql_dialect.hpp"
#include "sql/sql_transaction.hpp"
#include "sql/tracked_objects.hpp"

namespace idem::detail {
namespace {

tracked_objects& objects_of(unit_of_work& uow) {
    return uow.features().part<tracked_objects>();
}

}  // namespace

void* mapped_session::find(unit_of_work& uow, const table& type, const cell& key) {
    return objects_of(uow).find(uow, type, key);
}

void* mapped_session::add(unit_of_work& uow, const table& type, const void* object) {
    return objects_of(uow).add(type, object);
}

void mapped_session::remove(unit_of_work& uow, const table& type, const void* object) {
    objects_of(uow).remove(type, object);
}

void mapped_session::select(unit_of_work& uow, const table& type, std::string_view where, const parameter* params,
                            std::size_t count, std::vector<void*>& out) {
    objects_of(uow).select(uow, type, where, std::span<const parameter>(params, count), out);
}

void mapped_session::flush(unit_of_work& uow) {
    if (unit_state* state = uow.features_if_any()) state->flush(uow);
}

void mapped_session::hook(unit_of_work& uow, hook_kind kind, std::function<void()> run) {
    uow.features().add_hook(kind, std::move(run));
}

bool mapped_session::read(unit_of_work& uow, const table& type, const cell& key, void* object) {
    std::vector<cell> row;
    if (!mapped_statements::of(uow, type).load(uow, key, false, row)) return false;
    store_row(type, row, object);
    return true;
}

void mapped_session::create_table(unit_of_work& uow, const table& type) {
    uow.sql() << uow.internals().dialect().mapping().create_table(type);
}

void mapped_session::throw_not_found(const table& type) {
    throw not_found(std::string(type.type), std::string(type.name));
}

}  // namespace idem::detail
