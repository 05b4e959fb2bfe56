// Operations in steps as an operator reads and purges them (idem/operations.hpp),
// on the operations table's statements, each in a transaction of its own.
#include "idem/operations.hpp"

#include <stdexcept>

#include "idem/database.hpp"
#include "internal/crypto.hpp"
#include "sql/operations_table.hpp"
#include "sql/record_id.hpp"

namespace idem {

namespace table = detail::operations_table;

std::optional<operation_state> inspect_operation(database& db, const record_key& key) {
    const std::string record_id = detail::hex(detail::record_id(key.digest()));
    return db.transact([&](unit_of_work& uow) { return table::read(uow.sql(), record_id); });
}

std::vector<operation_state> unfinished_operations(database& db, std::string_view name_space, std::size_t limit) {
    if (limit < 1 || limit > 10000) throw std::invalid_argument("idem: unfinished_operations lists 1 to 10000");
    return db.transact([&](unit_of_work& uow) { return table::unfinished(uow.sql(), name_space, limit); });
}

purge_result purge_operations(database& db, const purge_options& options) {
    return purge_batches(
        [&](std::size_t limit, duration older_than) {
            const auto older = std::chrono::duration_cast<std::chrono::milliseconds>(older_than).count();
            return db.transact([&](unit_of_work& uow) { return table::purge(uow.sql(), limit, older); });
        },
        options);
}

}  // namespace idem
