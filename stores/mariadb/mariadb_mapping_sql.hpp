// Mapped rows' statements in MariaDB's SQL: the standard SQL
// (standard_mapping_statements.hpp), rows held with FOR UPDATE, and the
// column types and table options of db.create_table<T>().
#pragma once

#include <string>

#include "standard_mapping_statements.hpp"

namespace idem::detail::mariadb {

class mapping_sql final : public standard_mapping_statements {
public:
    mapping_sql() : standard_mapping_statements(" FOR UPDATE") {}

    // InnoDB, and text compared byte for byte without padding (utf8mb4_nopad_bin:
    // 'abc', 'ABC' and 'abc ' are three keys), whatever the database's defaults.
    [[nodiscard]] std::string create_table(const table& t) const override {
        return standard_mapping_statements::create_table(t) +
               " ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin";
    }

protected:
    // A key cannot be TEXT: a text key is a VARCHAR of 255 characters (1020
    // bytes, within InnoDB's 3072-byte index entries). Other text is LONGTEXT,
    // no shorter than PostgreSQL's. Booleans are TINYINT(1) (BOOLEAN), reals DOUBLE.
    [[nodiscard]] std::string column_type(const field& f, bool key) const override {
        switch (f.kind) {
            case field_kind::text: return key ? "VARCHAR(255)" : "LONGTEXT";
            case field_kind::real: return "DOUBLE";
            case field_kind::boolean: return "BOOLEAN";
            case field_kind::integer: break;
        }
        return standard_mapping_statements::column_type(f, key);
    }
};

}  // namespace idem::detail::mariadb
