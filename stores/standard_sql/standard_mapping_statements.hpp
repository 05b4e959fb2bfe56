// Mapped rows' statements in standard SQL, which SQLite, PostgreSQL and
// MariaDB all speak: a dialect gives the clause that holds a row until
// COMMIT and, where its names differ, the column types of
// db.create_table<T>(). Header-only, so that every store library that uses it
// has it without one more library beneath them.
//
//   const idem::detail::standard_mapping_statements mapping{" FOR UPDATE"};
//   mapping.load(table, true);  // "SELECT id, balance FROM accounts WHERE id = :key FOR UPDATE"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sql/mapping_statements.hpp"

namespace idem::detail {

class standard_mapping_statements : public mapping_statements {
public:
    // `lock`: what a SELECT ends with to hold its rows until COMMIT (" FOR
    // UPDATE"), empty where writers are serialised anyway (SQLite).
    explicit standard_mapping_statements(std::string lock) : lock_(std::move(lock)) {}

    [[nodiscard]] std::string probe(const table& t) const override {
        return "SELECT * FROM " + std::string(t.name) + " WHERE 1 = 0";
    }
    [[nodiscard]] std::string load(const table& t, bool lock) const override {
        return "SELECT " + columns(t) + " FROM " + std::string(t.name) + key_condition(t, false) +
               (lock ? lock_ : std::string());
    }
    [[nodiscard]] std::string select(const table& t, std::string_view where, bool lock) const override {
        std::string text = "SELECT " + columns(t) + " FROM " + std::string(t.name);
        if (!where.empty()) text += " WHERE " + std::string(where);
        return lock ? text + lock_ : text;
    }
    [[nodiscard]] std::string insert(const table& t) const override {
        std::string values;
        for (std::size_t i = 0; i < t.size; ++i) values += (i > 0 ? ", :v" : ":v") + std::to_string(i);
        return "INSERT INTO " + std::string(t.name) + " (" + columns(t) + ") VALUES (" + values + ")";
    }
    [[nodiscard]] std::string update(const table& t, std::uint64_t changed, bool versioned) const override {
        std::string sets;
        for (std::size_t i = 0; i < t.size; ++i)
            if ((changed & (std::uint64_t{1} << i)) != 0)
                sets += std::string(sets.empty() ? "" : ", ") + t.fields[i].name + " = :v" + std::to_string(i);
        return "UPDATE " + std::string(t.name) + " SET " + sets + key_condition(t, versioned);
    }
    [[nodiscard]] std::string erase(const table& t, bool versioned) const override {
        return "DELETE FROM " + std::string(t.name) + key_condition(t, versioned);
    }
    [[nodiscard]] std::string create_table(const table& t) const override {
        std::string list;
        for (std::size_t i = 0; i < t.size; ++i) {
            const field& f = t.fields[i];
            if (i > 0) list += ", ";
            list += std::string(f.name) + " " + column_type(f, f.role == column_role::key);
            if (!f.nullable) list += " NOT NULL";
            if (f.role == column_role::key) list += " PRIMARY KEY";
        }
        return "CREATE TABLE IF NOT EXISTS " + std::string(t.name) + " (" + list + ")";
    }

protected:
    // The column type of a mapped member; `key` for the key's column. By
    // default SQL's own names, which SQLite reads with the affinities (and
    // SOCI with the types) the members need.
    [[nodiscard]] virtual std::string column_type(const field& f, bool /*key*/) const {
        switch (f.kind) {
            case field_kind::text: return "TEXT";
            case field_kind::real: return "DOUBLE PRECISION";
            case field_kind::boolean: return "BOOLEAN";
            case field_kind::integer: break;
        }
        if (f.max <= 32767) return "SMALLINT";
        if (f.max <= 2147483647) return "INTEGER";
        return "BIGINT";
    }

private:
    static std::string columns(const table& t) {
        std::string list;
        for (std::size_t i = 0; i < t.size; ++i) {
            if (i > 0) list += ", ";
            list += t.fields[i].name;
        }
        return list;
    }
    static std::string key_condition(const table& t, bool versioned) {
        std::string condition = std::string(" WHERE ") + t.fields[t.key].name + " = :key";
        if (versioned) condition += std::string(" AND ") + t.fields[t.version].name + " = :seen";
        return condition;
    }

    std::string lock_;
};

}  // namespace idem::detail
