// idem/mapping.hpp: a struct mapped to a table, declared once, for SOCI
// (soci::use / soci::into), the unit of work (load, track, write) and db.once.
//
//   struct account { std::string id; long long balance = 0; long long version = 0; };
//   template <> struct idem::mapping<account> {  // in here, names are looked up in idem:: too
//       static constexpr auto table = "accounts";
//       static constexpr auto columns = std::tuple(key("id", &account::id),
//           column("balance", &account::balance), version("version", &account::version));
//   };
// and in a unit of work:
//   account& a = uow.get<account>("alice");  // loaded once per unit of work, then tracked
//
// Member types, versions and errors: docs/mapping.md.
#pragma once

#include <tuple>
#include <type_traits>

#include "idem/detail/mapped_session.hpp"
#include "idem/detail/mapped_table.hpp"

namespace idem {

// The primary key column: get<T>(key) finds the object by it.
template <class Object, class Member>
[[nodiscard]] constexpr column_spec<Object, Member> key(const char* name, Member Object::*member) noexcept {
    return {name, member, column_role::key};
}

template <class Object, class Member>
[[nodiscard]] constexpr column_spec<Object, Member> column(const char* name, Member Object::*member) noexcept {
    return {name, member, column_role::data};
}

// The optimistic version: a changed object is written WHERE version = the
// version it was read with, and the version goes up by one; zero rows is a
// stale write (store_failure::conflict), and idem::database runs the unit of
// work again. A type without one is read FOR UPDATE on PostgreSQL instead.
template <class Object, class Member>
[[nodiscard]] constexpr column_spec<Object, Member> version(const char* name, Member Object::*member) noexcept {
    return {name, member, column_role::version};
}

// The columns of a mapping, in order; the same as std::tuple(specs...).
template <class... Specs>
[[nodiscard]] constexpr std::tuple<Specs...> columns(Specs... specs) noexcept {
    return {specs...};
}

// A type with an idem::mapping.
template <class T>
concept mapped = requires {
    mapping<T>::table;
    mapping<T>::columns;
};

}  // namespace idem

namespace soci {

class values;
template <typename T, typename Enable>
struct type_conversion;

// A mapped type is SOCI's too, by the same declaration: its columns by name.
// (The indicator is a template parameter only because SOCI's enum cannot be
// declared here without its header.)
template <idem::mapped T>
struct type_conversion<T, void> {
    using base_type = values;

    template <class Indicator>
    static void from_base(const values& v, Indicator, T& out) {
        idem::detail::mapped_session::from_values(v, idem::detail::table_of<T>(), &out);
    }

    template <class Indicator>
    static void to_base(const T& in, values& v, Indicator& ind) {
        idem::detail::mapped_session::to_values(idem::detail::table_of<T>(), &in, v);
        ind = Indicator::i_ok;
    }
};

}  // namespace soci
