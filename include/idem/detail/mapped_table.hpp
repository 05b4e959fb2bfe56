// idem/detail/mapped_table.hpp: a mapped type (idem::mapping<T>, idem/mapping.hpp)
// as idem's compiled code sees it: its table, and for each column the kind of
// its member and functions that copy the member to and from a cell. Built once
// per type, at its first use, after compile-time checks of the mapping. Not API.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace idem {

template <class T>
struct mapping;

// What a column is to its object: the key (one per mapping), a plain value, or
// the version that guards concurrent writes (at most one, an integer).
enum class column_role : unsigned char { key, data, version };

// One column of a mapping: its SQL name, the member it maps, its role. Made by
// idem::key, idem::column and idem::version (idem/mapping.hpp).
template <class Object, class Member>
struct column_spec {
    using object_type = Object;
    using member_type = Member;
    const char* name;
    Member Object::*member;
    column_role role;
};

namespace detail {

// What a member holds, as SQL sees it.
enum class field_kind : unsigned char { text, integer, real, boolean };

// One value on its way between a member and a statement.
struct cell {
    bool null = false;
    long long integer = 0;  // integer and boolean (0 or 1)
    double real = 0;
    std::string text;
};

template <class M>
struct member_traits {
    static constexpr bool supported = false;
};
template <>
struct member_traits<std::string> {
    static constexpr bool supported = true;
    static constexpr field_kind kind = field_kind::text;
};
template <>
struct member_traits<bool> {
    static constexpr bool supported = true;
    static constexpr field_kind kind = field_kind::boolean;
};
template <>
struct member_traits<double> {
    static constexpr bool supported = true;
    static constexpr field_kind kind = field_kind::real;
};
template <class I>
requires(std::is_same_v<I, short> || std::is_same_v<I, int> || std::is_same_v<I, long> ||
         std::is_same_v<I, long long>) struct member_traits<I> {
    static constexpr bool supported = true;
    static constexpr field_kind kind = field_kind::integer;
};

template <class M>
inline constexpr bool is_optional = false;
template <class M>
inline constexpr bool is_optional<std::optional<M>> = true;

// The value type of a member: M itself, or what a std::optional<M> holds.
template <class M>
struct value_of {
    using type = M;
};
template <class M>
struct value_of<std::optional<M>> {
    using type = M;
};
template <class M>
using value_of_t = typename value_of<M>::type;

template <class M>
inline constexpr bool supported_member =
    member_traits<value_of_t<M>>::supported && !is_optional<value_of_t<M>> && !std::is_const_v<M>;

template <class M>
void to_cell(const M& value, cell& out) {
    if constexpr (is_optional<M>) {
        if (!value) {
            out.null = true;
            return;
        }
        to_cell(*value, out);
    } else {
        out.null = false;
        if constexpr (std::is_same_v<M, std::string>)
            out.text = value;
        else if constexpr (std::is_same_v<M, double>)
            out.real = value;
        else if constexpr (std::is_same_v<M, bool>)
            out.integer = value ? 1 : 0;
        else
            out.integer = value;
    }
}

// False when the cell does not fit the member (NULL in a member that is no
// std::optional, an integer out of its range); the member is then unchanged.
template <class M>
bool from_cell(const cell& in, M& value) {
    if constexpr (is_optional<M>) {
        if (in.null) {
            value.reset();
            return true;
        }
        typename M::value_type held{};
        if (!from_cell(in, held)) return false;
        value = std::move(held);
        return true;
    } else {
        if (in.null) return false;
        if constexpr (std::is_same_v<M, std::string>) {
            value = in.text;
        } else if constexpr (std::is_same_v<M, double>) {
            value = in.real;
        } else if constexpr (std::is_same_v<M, bool>) {
            value = in.integer != 0;
        } else {
            if (in.integer < std::numeric_limits<M>::min() || in.integer > std::numeric_limits<M>::max()) return false;
            value = static_cast<M>(in.integer);
        }
        return true;
    }
}

// One column, type-erased: what compiled code needs to bind and read it.
struct field {
    const char* name;
    column_role role;
    field_kind kind;
    bool nullable;
    long long max;  // integers: the member's largest value (its width, for a column type)
    void (*read)(const void* object, cell& out);
    bool (*write)(void* object, const cell& in);
    bool (*equal)(const void* a, const void* b);
};

// One mapped type, type-erased.
struct table {
    std::string_view type;  // the C++ type's name, for messages
    std::string_view name;  // the SQL table
    const field* fields;
    std::size_t size;
    std::size_t key;
    std::size_t version;  // == size: no version column
    void* (*make)();
    void* (*copy)(const void* from);
    void (*assign)(void* to, const void* from);
    void (*destroy)(void* object) noexcept;

    [[nodiscard]] bool versioned() const noexcept { return version < size; }
};

// A key as text: what the identity map keys an object by, and what db.once's
// record keeps of a mapped result.
inline std::string key_text(const table& type, const cell& key) {
    return type.fields[type.key].kind == field_kind::text ? key.text : std::to_string(key.integer);
}

// The C++ name of T, for messages (GCC's and Clang's __PRETTY_FUNCTION__).
template <class T>
std::string_view type_name() noexcept {
    const std::string_view pretty = __PRETTY_FUNCTION__;
    const std::size_t start = pretty.find("T = ");
    if (start == std::string_view::npos) return "a mapped type";
    const std::size_t end = pretty.find_first_of(";]", start + 4);
    return pretty.substr(start + 4, end - start - 4);
}

template <class T>
using specs_of = std::remove_cvref_t<decltype(mapping<T>::columns)>;

template <class T, std::size_t I>
constexpr const auto& spec_of() noexcept {
    return std::get<I>(mapping<T>::columns);
}

template <class Specs>
inline constexpr bool is_column_tuple = false;
template <class... Objects, class... Members>
inline constexpr bool is_column_tuple<std::tuple<column_spec<Objects, Members>...>> = true;

template <class Specs>
struct tuple_count {
    static constexpr std::size_t value = 0;  // no tuple: checked_mapping says so
};
template <class... Specs>
struct tuple_count<std::tuple<Specs...>> {
    static constexpr std::size_t value = sizeof...(Specs);
};

template <class T>
inline constexpr std::size_t column_count = tuple_count<specs_of<T>>::value;

template <class T, std::size_t... I>
constexpr std::array<column_role, sizeof...(I)> roles_of(std::index_sequence<I...>) {
    return {spec_of<T, I>().role...};
}

template <class T>
constexpr std::size_t role_count(column_role role) {
    std::size_t n = 0;
    for (const column_role r : roles_of<T>(std::make_index_sequence<column_count<T>>{})) n += r == role ? 1 : 0;
    return n;
}

// The index of the first column with `role`; column_count<T> when there is none.
template <class T>
constexpr std::size_t role_index(column_role role) {
    const auto roles = roles_of<T>(std::make_index_sequence<column_count<T>>{});
    for (std::size_t i = 0; i < roles.size(); ++i)
        if (roles[i] == role) return i;
    return roles.size();
}

// A plain SQL identifier (letters, digits, '_', not starting with a digit);
// a table may be qualified by its schema ("bank.accounts").
constexpr bool plain_identifier(std::string_view name, bool qualified) {
    if (name.empty()) return false;
    bool start = true;
    for (const char c : name) {
        const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        const bool digit = c >= '0' && c <= '9';
        if (qualified && c == '.' && !start) {
            start = true;
            continue;
        }
        if (!(letter || (digit && !start))) return false;
        start = false;
    }
    return !start;
}

template <class T, std::size_t... I>
constexpr bool names_plain(std::index_sequence<I...>) {
    return (plain_identifier(spec_of<T, I>().name, false) && ...);
}

template <class T, std::size_t... I>
constexpr bool names_distinct(std::index_sequence<I...>) {
    const std::string_view names[] = {std::string_view(spec_of<T, I>().name)..., std::string_view()};
    for (std::size_t a = 0; a < sizeof...(I); ++a)
        for (std::size_t b = a + 1; b < sizeof...(I); ++b)
            if (names[a] == names[b]) return false;
    return true;
}

template <class T, class Spec>
inline constexpr bool member_of_type = std::is_base_of_v<typename Spec::object_type, T>;

template <class T, class Specs>
struct spec_types;
template <class T, class... Specs>
struct spec_types<T, std::tuple<Specs...>> {
    static constexpr bool members_of_t = (member_of_type<T, Specs> && ...);
    static constexpr bool members_supported = (supported_member<typename Specs::member_type> && ...);
};

template <class T, std::size_t I>
using member_at = typename std::tuple_element_t<I, specs_of<T>>::member_type;

template <class T, std::size_t I, bool Present>
struct version_member_ok {
    static constexpr bool value = true;
};
template <class T, std::size_t I>
struct version_member_ok<T, I, true> {
    using member = member_at<T, I>;
    static constexpr bool value = std::is_integral_v<member> && !std::is_same_v<member, bool>;
};

template <class T, std::size_t I, bool Present>
struct key_member_ok {
    static constexpr bool value = true;
};
template <class M>
constexpr bool integer_member() {
    if constexpr (member_traits<M>::supported)
        return member_traits<M>::kind == field_kind::integer;
    else
        return false;
}

template <class T, std::size_t I>
struct key_member_ok<T, I, true> {
    using member = member_at<T, I>;
    static constexpr bool value = std::is_same_v<member, std::string> || integer_member<member>();
};

// Every compile-time check of a mapping, with the message the compiler prints.
template <class T>
struct checked_mapping {
    static_assert(
        requires { mapping<T>::table; },
        "idem::mapping<T> needs `static constexpr auto table = \"name\";`, the table it maps");
    static_assert(is_column_tuple<specs_of<T>>,
                  "idem::mapping<T> needs `static constexpr auto columns = std::tuple(key(...), column(...), ...);`");
    static_assert(std::is_copy_constructible_v<T> && std::is_copy_assignable_v<T> && std::is_default_constructible_v<T>,
                  "idem::mapping<T>: T must be default-constructible and copyable (its snapshot is a copy)");
    static_assert(plain_identifier(mapping<T>::table, true),
                  "idem::mapping<T>: the table is not a plain SQL identifier (letters, digits, '_', schema.table)");
    static_assert(names_plain<T>(std::make_index_sequence<column_count<T>>{}),
                  "idem::mapping<T>: a column name is not a plain SQL identifier (letters, digits, '_')");
    static_assert(names_distinct<T>(std::make_index_sequence<column_count<T>>{}),
                  "idem::mapping<T>: two columns have the same name");
    static_assert(spec_types<T, specs_of<T>>::members_of_t,
                  "idem::mapping<T>: a column names a member of another type");
    static_assert(spec_types<T, specs_of<T>>::members_supported,
                  "idem::mapping<T>: a column's member type has no SQL mapping; use std::string, bool, short, int, "
                  "long, long long, double, or a std::optional of one");
    static_assert(column_count<T> <= 63, "idem::mapping<T>: at most 63 columns");
    static_assert(role_count<T>(column_role::key) == 1,
                  "idem::mapping<T> needs exactly one idem::key column (its primary key)");
    static_assert(role_count<T>(column_role::version) <= 1, "idem::mapping<T> has more than one idem::version column");
    static_assert(key_member_ok<T, role_index<T>(column_role::key), role_count<T>(column_role::key) == 1>::value,
                  "idem::mapping<T>: the key column must be a std::string or an integer (not optional)");
    static_assert(
        version_member_ok<T, role_index<T>(column_role::version), role_count<T>(column_role::version) == 1>::value,
        "idem::mapping<T>: the version column must be an integer (short, int, long or long long)");
    static constexpr bool ok = true;
};

// The key member's type: what get<T>() and find<T>() take.
template <class T, bool One = (role_count<T>(column_role::key) == 1)>
struct key_type_of {
    using type = int;  // a mapping without one key: checked_mapping says so
};
template <class T>
struct key_type_of<T, true> {
    using type = member_at<T, role_index<T>(column_role::key)>;
};
template <class T>
using key_type_t = typename key_type_of<T>::type;

template <class T, std::size_t I>
struct field_access {
    using member = member_at<T, I>;
    static void read(const void* object, cell& out) {
        to_cell(static_cast<const T*>(object)->*(spec_of<T, I>().member), out);
    }
    static bool write(void* object, const cell& in) {
        return from_cell(in, static_cast<T*>(object)->*(spec_of<T, I>().member));
    }
    static bool equal(const void* a, const void* b) {
        constexpr auto member = spec_of<T, I>().member;
        return static_cast<const T*>(a)->*member == static_cast<const T*>(b)->*member;
    }
    static constexpr field describe() {
        using value = value_of_t<member>;
        long long max = 0;
        if constexpr (member_traits<value>::kind == field_kind::integer) max = std::numeric_limits<value>::max();
        return {spec_of<T, I>().name,
                spec_of<T, I>().role,
                member_traits<value>::kind,
                is_optional<member>,
                max,
                &read,
                &write,
                &equal};
    }
};

template <class T, std::size_t... I>
const field* fields_of(std::index_sequence<I...>) {
    static const field fields[] = {field_access<T, I>::describe()...};
    return fields;
}

// The erased description of T, built once.
template <class T>
const table& table_of() {
    static_assert(checked_mapping<T>::ok);
    static const table described{
        type_name<T>(),
        mapping<T>::table,
        fields_of<T>(std::make_index_sequence<column_count<T>>{}),
        column_count<T>,
        role_index<T>(column_role::key),
        role_index<T>(column_role::version),
        []() -> void* { return new T(); },
        [](const void* from) -> void* { return new T(*static_cast<const T*>(from)); },
        [](void* to, const void* from) { *static_cast<T*>(to) = *static_cast<const T*>(from); },
        [](void* object) noexcept { delete static_cast<T*>(object); },
    };
    return described;
}

template <class T>
cell key_cell(const key_type_t<T>& key) {
    cell c;
    to_cell(key, c);
    return c;
}

// A parameter of select<T>(where, params...): what a column can hold, a string
// literal, or std::nullopt (NULL).
struct parameter {
    field_kind kind = field_kind::text;
    cell value;
};

template <class P>
parameter parameter_of(const P& value) {
    using plain = std::remove_cvref_t<P>;
    parameter p;
    if constexpr (std::is_same_v<plain, std::nullopt_t>) {
        p.value.null = true;
    } else if constexpr (std::is_convertible_v<const P&, std::string_view>) {
        p.value.text = std::string(std::string_view(value));
    } else {
        static_assert(supported_member<plain>,
                      "idem: a select() parameter must be a std::string, a string literal, bool, an integer, "
                      "double, std::nullopt, or a std::optional of one");
        p.kind = member_traits<value_of_t<plain>>::kind;
        to_cell(value, p.value);
    }
    return p;
}

}  // namespace detail
}  // namespace idem
