// What the MariaDB store's files share: the dialect, the connection string
// SOCI's mysql backend takes for a mariadb:// URL, and the server's error
// codes as idem's failures.
#pragma once

#include <string>
#include <string_view>

namespace soci {
class session;
}

namespace idem::detail {
class sql_dialect;
}

namespace idem::detail::mariadb {

[[nodiscard]] const sql_dialect& dialect() noexcept;
void install_dialect() noexcept;
void register_store();

// SOCI's mysql connection string for `url` (mariadb://... or mysql://...);
// std::invalid_argument naming what is wrong, never repeating a password.
[[nodiscard]] std::string soci_connection_string(std::string_view url);

// Throws the store_error for a server or client error `code` (ER_*, CR_*)
// met while doing `what`: deadlocks and lock waits transient, duplicates a
// lost race, a lost connection, a read-only server, a packet too large.
[[noreturn]] void raise(unsigned code, std::string_view message, std::string_view what);

}  // namespace idem::detail::mariadb
