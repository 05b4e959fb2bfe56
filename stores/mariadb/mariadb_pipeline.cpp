#include "mariadb_pipeline.hpp"

#include <soci/mysql/soci-mysql.h>
#include <soci/session.h>

#include <utility>

namespace idem::detail::mariadb {

MYSQL* native_handle(soci::session& session) {
    return static_cast<soci::mysql_session_backend*>(session.get_backend())->conn_;
}

std::string hex_literal(std::string_view bytes) {
    constexpr const char* digits = "0123456789ABCDEF";
    std::string out;
    out.reserve(2 * bytes.size() + 3);
    out += "X'";
    for (const char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out += '\'';
}

pipeline::pipeline(MYSQL* conn, std::initializer_list<std::string_view> statements) : conn_(conn) {
    // A statement that cannot be sent ends the sending: its error is its
    // answer, after those of the statements sent before it, and nothing after it goes out.
    for (const std::string_view statement : statements) {
        if (mysql_send_query(conn_, statement.data(), statement.size()) != 0) {
            unsent_error_ = mysql_errno(conn_);
            unsent_message_ = mysql_error(conn_);
            break;
        }
        ++unread_;
    }
    next();
}

pipeline::~pipeline() {
    while (next()) {
    }
    if (rows_ != nullptr) mysql_free_result(rows_);
}

bool pipeline::next() {
    if (rows_ != nullptr) mysql_free_result(rows_);
    rows_ = nullptr;
    if (unread_ > 0) {
        read_answer();
        return true;
    }
    if (unsent_error_ == 0) return false;
    error_ = std::exchange(unsent_error_, 0);
    message_ = std::move(unsent_message_);
    return true;
}

// A statement's rows are read whole (as SOCI's backend reads them): the next
// statement's answer comes after them on the wire. A compound statement may
// answer with more than one result: those are read and dropped.
void pipeline::read_answer() {
    --unread_;
    error_ = 0;
    message_.clear();
    if (mysql_read_query_result(conn_) != 0) {
        error_ = mysql_errno(conn_);
        message_ = mysql_error(conn_);
        return;
    }
    rows_ = mysql_store_result(conn_);
    if (rows_ == nullptr && mysql_field_count(conn_) != 0) {
        error_ = mysql_errno(conn_);
        message_ = mysql_error(conn_);
        return;
    }
    while (mysql_more_results(conn_)) {
        if (mysql_next_result(conn_) > 0) {
            error_ = mysql_errno(conn_);
            message_ = mysql_error(conn_);
            return;
        }
        if (MYSQL_RES* more = mysql_store_result(conn_); more != nullptr) mysql_free_result(more);
    }
}

}  // namespace idem::detail::mariadb
