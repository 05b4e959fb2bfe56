// idem/detail/mapped_session.hpp: what the unit of work's mapped-object
// templates (get, find, add, remove, select, flush, the hooks; idem/unit_of_work.hpp)
// and SOCI's conversion of a mapped type (idem/mapping.hpp) call in idem_sql,
// on the erased description of the type (idem/detail/mapped_table.hpp). The
// identity map, the snapshots and the statements live there (lib/sql). Not API.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "idem/detail/mapped_table.hpp"
#include "idem/detail/unit_state.hpp"
#include "idem/export.hpp"

namespace soci {
class values;
}

namespace idem {

class unit_of_work;

namespace detail {

struct IDEM_API mapped_session {
    // The tracked object of `key`: from the identity map, else loaded (and
    // tracked); null when there is no such row, or it was removed in this unit.
    [[nodiscard]] static void* find(unit_of_work& uow, const table& type, const cell& key);
    // Tracks a copy of `object` as new (INSERT at the next flush); returns it.
    static void* add(unit_of_work& uow, const table& type, const void* object);
    // Marks a tracked object removed (DELETE at the next flush).
    static void remove(unit_of_work& uow, const table& type, const void* object);
    // Flushes, then the tracked objects of the rows `where` selects, in order.
    static void select(unit_of_work& uow, const table& type, std::string_view where, const parameter* params,
                       std::size_t count, std::vector<void*>& out);
    // Writes every change the unit of work holds back (and whatever other parts it holds).
    static void flush(unit_of_work& uow);
    static void hook(unit_of_work& uow, hook_kind kind, std::function<void()> run);
    // Reads the row of `key` into `object` without tracking or locking it (a
    // replay of db.once); false when there is none.
    [[nodiscard]] static bool read(unit_of_work& uow, const table& type, const cell& key, void* object);
    // CREATE TABLE IF NOT EXISTS, with the dialect's column types.
    static void create_table(unit_of_work& uow, const table& type);

    // soci::type_conversion of a mapped type: every column by name.
    static void from_values(const soci::values& values, const table& type, void* object);
    static void to_values(const table& type, const void* object, soci::values& values);

    [[noreturn]] static void throw_not_found(const table& type);
};

}  // namespace detail
}  // namespace idem
