// Statements sent to MariaDB ahead of their answers, on a session's own
// connection (the native MYSQL* under SOCI's mysql backend): the round trip
// the MariaDB fast path saves when db.once's held-back START TRANSACTION goes
// out with its lookup (look_up in mariadb_records.cpp).
//
// Each statement is a request of its own (COM_QUERY): the server runs them in
// order and answers each, whatever the one before it answered, so only
// statements that may run after a failed one share a pipeline. The connection
// never takes several statements in one request (the server's multi-statement
// option stays off), so an application's own statements on the session keep
// that protection.
#pragma once

#include <mysql.h>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace soci {
class session;
}

namespace idem::detail::mariadb {

[[nodiscard]] MYSQL* native_handle(soci::session& session);

// `bytes` as a hexadecimal literal, X'…': the same bytes whatever character
// set the connection is in (a SET NAMES the client library never heard of
// cannot turn an escaped quote into part of a character), nothing escaped.
[[nodiscard]] std::string hex_literal(std::string_view bytes);

class pipeline {
public:
    // Sends every statement without waiting, then reads the first one's answer.
    pipeline(MYSQL* conn, std::initializer_list<std::string_view> statements);
    // Reads and frees the answers left, so that SOCI's next statement finds the connection idle.
    ~pipeline();
    pipeline(const pipeline&) = delete;
    pipeline& operator=(const pipeline&) = delete;

    // The current statement's error (ER_*, CR_*), 0 when it succeeded.
    [[nodiscard]] unsigned error() const noexcept { return error_; }
    [[nodiscard]] const std::string& message() const noexcept { return message_; }
    // The current statement's rows (null when it returned none); the pipeline keeps them.
    [[nodiscard]] MYSQL_RES* rows() const noexcept { return rows_; }
    // Moves to the next statement's answer; false when none is left.
    bool next();

private:
    void read_answer();

    MYSQL* conn_;
    std::size_t unread_ = 0;     // answers sent for and not read yet
    unsigned unsent_error_ = 0;  // why the statement after them could not be sent
    std::string unsent_message_;
    MYSQL_RES* rows_ = nullptr;
    unsigned error_ = 0;
    std::string message_;
};

}  // namespace idem::detail::mariadb
