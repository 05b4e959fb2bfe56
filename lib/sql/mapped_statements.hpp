// The SQL of one mapped type (idem/detail/mapped_table.hpp) on one connection:
// the load by key, the INSERT, an UPDATE per set of changed columns and the
// DELETE, each prepared at its first use and kept with the connection's runner
// (behind a transaction pooler, made for each use instead). Rows go in and come
// out as cells, one per column in the mapping's order; a value the member
// cannot hold is a mapping_error naming the column.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "idem/detail/mapped_table.hpp"

namespace idem {
class unit_of_work;
}

namespace idem::detail {

class bound_statement;

class mapped_statements {
public:
    // The statements of `type` on the connection of `uow`. At their first use
    // there, the table is checked for every mapped column: a mapping_error names
    // the first one it lacks (or says the table is missing).
    static mapped_statements& of(unit_of_work& uow, const table& type);

    explicit mapped_statements(const table& type);
    ~mapped_statements();
    mapped_statements(const mapped_statements&) = delete;
    mapped_statements& operator=(const mapped_statements&) = delete;

    // The row of `key` in `row`; false when there is none. `lock`: hold it until
    // COMMIT (the dialect's lock clause).
    bool load(unit_of_work& uow, const cell& key, bool lock, std::vector<cell>& row);
    // Each row that `where` selects.
    void select(unit_of_work& uow, std::string_view where, std::span<const parameter> params, bool lock,
                const std::function<void(std::vector<cell>&)>& each);
    void insert(unit_of_work& uow, const std::vector<cell>& row);
    // Sets the columns whose bit is in `changed` to their cells of `row`, where
    // the key is `row`'s key and, given `seen`, the version column is `seen`.
    // Returns the number of rows changed.
    long long update(unit_of_work& uow, std::uint64_t changed, const std::vector<cell>& row, const cell* seen);
    long long erase(unit_of_work& uow, const cell& key, const cell* seen);

private:
    enum kind : std::size_t { load_plain, load_locked, insert_row, erase_plain, erase_versioned, kind_count };

    // The statement `text` (the dialect's) with parameters of kinds `in`,
    // reading every column when `reads`: the one kept in `slot` (`text` then
    // unused), else made there (and kept when the connection keeps
    // statements; `once` otherwise).
    bound_statement& prepared(unit_of_work& uow, std::unique_ptr<bound_statement>& slot,
                              std::unique_ptr<bound_statement>& once, const std::string& text,
                              std::vector<field_kind> in, bool reads);
    void check_columns(unit_of_work& uow);

    const table& type_;
    bool checked_ = false;
    std::unique_ptr<bound_statement> fixed_[kind_count];
    std::unordered_map<std::uint64_t, std::unique_ptr<bound_statement>> updates_;  // by changed columns
};

}  // namespace idem::detail
