// The statements of mapped rows (idem::mapping<T>, idem/mapping.hpp) on one
// mapped type's table, as one dialect writes them. mapped_statements.cpp
// decides when each runs, prepares it once per connection and binds the
// values; the dialect writes the text (most with the standard SQL of
// stores/standard_sql/standard_mapping_statements.hpp).
//
// Parameters bind by position, in this order: the columns' values (:v<i>, i
// the column's place in the mapping, in that order), then the key of the row
// the statement names (:key), then the version its writer read (:seen). What
// a statement reads is every mapped column, in the mapping's order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "idem/detail/mapped_table.hpp"

namespace idem::detail {

class mapping_statements {
public:
    virtual ~mapping_statements() = default;

    // Reads no row, every column of the table: what the table has.
    [[nodiscard]] virtual std::string probe(const table& t) const = 0;
    // The row whose key is :key, held until COMMIT when `lock`.
    [[nodiscard]] virtual std::string load(const table& t, bool lock) const = 0;
    // The rows `where` (the caller's condition, its own parameters; empty:
    // every row) chooses, held until COMMIT when `lock`.
    [[nodiscard]] virtual std::string select(const table& t, std::string_view where, bool lock) const = 0;
    [[nodiscard]] virtual std::string insert(const table& t) const = 0;
    // Sets the columns whose bit is set in `changed` (bit i: column i) of the
    // row :key, and only while its version is :seen when `versioned`.
    [[nodiscard]] virtual std::string update(const table& t, std::uint64_t changed, bool versioned) const = 0;
    // Deletes the row :key, and only while its version is :seen when `versioned`.
    [[nodiscard]] virtual std::string erase(const table& t, bool versioned) const = 0;
    // Creates the table unless it exists (db.create_table<T>()).
    [[nodiscard]] virtual std::string create_table(const table& t) const = 0;

protected:
    mapping_statements() = default;
    mapping_statements(const mapping_statements&) = default;
    mapping_statements& operator=(const mapping_statements&) = default;
};

}  // namespace idem::detail
