// SOCI's conversion of a mapped type (the soci::type_conversion of
// idem/mapping.hpp): soci::into(t) reads each column by name from SOCI's
// values, whatever type SOCI gives it (SQLite reports the declared type,
// PostgreSQL the column's), soci::use(t) binds each by name.
#include <soci/soci.h>

#include <charconv>
#include <limits>
#include <memory>
#include <string>

#include "idem/detail/mapped_session.hpp"
#include "idem/error.hpp"
#include "sql/tracked_objects.hpp"

namespace idem::detail {
namespace {

[[noreturn]] void unreadable(const table& type, const field& f, const std::string& why) {
    throw mapping_error(std::string(type.type), f.name, why);
}

void from_text(const table& type, const field& f, const std::string& text, cell& c) {
    switch (f.kind) {
        case field_kind::text: c.text = text; return;
        case field_kind::boolean:
            if (text == "t" || text == "true" || text == "1") {
                c.integer = 1;
                return;
            }
            if (text == "f" || text == "false" || text == "0") {
                c.integer = 0;
                return;
            }
            unreadable(type, f, "holds a value that is no boolean");
        case field_kind::integer: {
            const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), c.integer);
            if (failure != std::errc() || end != text.data() + text.size())
                unreadable(type, f, "holds a value that is no integer");
            return;
        }
        case field_kind::real: {
            const auto [end, failure] = std::from_chars(text.data(), text.data() + text.size(), c.real);
            if (failure != std::errc() || end != text.data() + text.size())
                unreadable(type, f, "holds a value that is no number");
            return;
        }
    }
}

void from_integer(const table& type, const field& f, long long value, cell& c) {
    switch (f.kind) {
        case field_kind::integer:
        case field_kind::boolean: c.integer = value; return;
        case field_kind::real: c.real = static_cast<double>(value); return;
        case field_kind::text: unreadable(type, f, "holds an integer, and its member is a string");
    }
}

cell read_column(const soci::values& v, const table& type, const field& f) {
    cell c;
    try {
        if (v.get_indicator(f.name) == soci::i_null) {
            c.null = true;
            return c;
        }
        switch (v.get_properties(f.name).get_data_type()) {
            case soci::dt_string: from_text(type, f, v.get<std::string>(f.name), c); break;
            case soci::dt_integer: from_integer(type, f, v.get<int>(f.name), c); break;
            case soci::dt_long_long: from_integer(type, f, v.get<long long>(f.name), c); break;
            case soci::dt_unsigned_long_long: {
                const unsigned long long value = v.get<unsigned long long>(f.name);
                if (value > static_cast<unsigned long long>(std::numeric_limits<long long>::max()))
                    unreadable(type, f, "holds a value past 64 bits");
                from_integer(type, f, static_cast<long long>(value), c);
                break;
            }
            case soci::dt_double:
                if (f.kind != field_kind::real) unreadable(type, f, "holds a real number, and its member is not one");
                c.real = v.get<double>(f.name);
                break;
            default: unreadable(type, f, "has a column type the mapping cannot read (a date, a blob)");
        }
    } catch (const soci::soci_error&) {
        // SOCI finds columns by name: the statement did not read this one.
        unreadable(type, f, "is not among the columns the statement read");
    }
    return c;
}

}  // namespace

void mapped_session::from_values(const soci::values& v, const table& type, void* object) {
    std::vector<cell> row(type.size);
    for (std::size_t i = 0; i < type.size; ++i) row[i] = read_column(v, type, type.fields[i]);
    // Into a copy first: a row that does not fit leaves the object as it was.
    const std::unique_ptr<void, void (*)(void*) noexcept> copy(type.copy(object), type.destroy);
    store_row(type, row, copy.get());
    type.assign(object, copy.get());
}

void mapped_session::to_values(const table& type, const void* object, soci::values& v) {
    for (std::size_t i = 0; i < type.size; ++i) {
        const field& f = type.fields[i];
        cell c;
        f.read(object, c);
        const soci::indicator ind = c.null ? soci::i_null : soci::i_ok;
        switch (f.kind) {
            case field_kind::text: v.set(f.name, c.text, ind); break;
            case field_kind::real: v.set(f.name, c.real, ind); break;
            case field_kind::integer:
            case field_kind::boolean: v.set(f.name, c.integer, ind); break;
        }
    }
}

}  // namespace idem::detail
