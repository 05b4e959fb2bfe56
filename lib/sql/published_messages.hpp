// The messages a unit of work has published and not yet written, its part of
// the unit's state (idem/detail/unit_state.hpp), beside the mapped objects: a
// flush writes them to the outbox table, in the order they were published, so
// they commit or roll back with the transaction. A flush runs before a
// savepoint opens, so a rollback to one drops exactly the messages held back
// since; those written inside it go with the database's rollback.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "idem/detail/unit_state.hpp"
#include "sql/outbox_table.hpp"

namespace idem::detail {

class published_messages final : public unit_part {
public:
    explicit published_messages(int depth) noexcept { (void)depth; }

    // The message's id: from `record` (its storage key), the token of the
    // db.once `call` running its work and the message's place among those of
    // that work, or random without a record.
    std::string add(outgoing_message message, const record_key* record, std::string_view call);

    void flush(unit_of_work& uow) override;
    void savepoint_rolled_back(int depth) override;

private:
    std::vector<outbox_table::new_row> held_;
    std::map<std::string, std::size_t, std::less<>> published_by_record_;  // by storage key
};

}  // namespace idem::detail
