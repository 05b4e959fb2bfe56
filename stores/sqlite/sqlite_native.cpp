#include "sqlite_native.hpp"

#include <soci/session.h>

#include <stdexcept>
#include <string>

namespace idem::detail::sqlite {

database* native_handle(soci::session& session) {
    if (session.get_backend() == nullptr || session.get_backend_name() != "sqlite3")
        throw std::invalid_argument("idem: the session is not a SQLite session");
    return static_cast<soci::sqlite3_session_backend*>(session.get_backend())->conn_;
}

store_failure classify(int result_code) noexcept {
    switch (result_code & 0xff) {
        case SQLITE_BUSY:
        case SQLITE_LOCKED: return store_failure::timeout;
        case SQLITE_CANTOPEN:
        case SQLITE_IOERR: return store_failure::connection_lost;
        case SQLITE_SCHEMA: return store_failure::conflict;
        case SQLITE_CONSTRAINT: return store_failure::constraint;
        default: return store_failure::other;
    }
}

store_error error(int result_code, std::string_view what) {
    return store_error(classify(result_code),
                       "idem: " + std::string(what) + ": " + sqlite_api::sqlite3_errstr(result_code) + " (SQLite " +
                           std::to_string(result_code) + ")",
                       std::to_string(result_code));
}

void throw_last_error(database* db, std::string_view what) {
    throw error(sqlite_api::sqlite3_extended_errcode(db), what);
}

void execute(database* db, const char* sql, std::string_view what) {
    // The error message sqlite3_exec could return names SQL, not values, but
    // error() keeps to the generic text of the code anyway.
    if (sqlite_api::sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) throw_last_error(db, what);
}

statement::statement(database* db, std::string_view sql, std::string_view what) : db_(db), what_(what) {
    const int rc = sqlite_api::sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                                  SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
    if (rc != SQLITE_OK) {
        const int code = sqlite_api::sqlite3_extended_errcode(db);
        if ((code & 0xff) != SQLITE_ERROR) throw error(code, what);
        throw store_error(store_failure::schema,
                          "idem: " + std::string(what) + ": the idem schema is missing or outdated (run migrate())",
                          std::to_string(code));
    }
}

statement::~statement() {
    sqlite_api::sqlite3_finalize(stmt_);
}

namespace {
// Bindings are kept by pointer (SQLITE_STATIC): the caller's buffers outlive the step.
constexpr sqlite_api::sqlite3_destructor_type keep_pointer = nullptr;
}  // namespace

void statement::bind(int index, std::span<const std::byte> blob) {
    bind_blob(index, std::string_view(reinterpret_cast<const char*>(blob.data()), blob.size()));
}

void statement::bind_blob(int index, std::string_view bytes) {
    // A null pointer would bind NULL; an empty payload must stay an empty blob.
    const int rc = bytes.empty()
                       ? sqlite_api::sqlite3_bind_zeroblob(stmt_, index, 0)
                       : sqlite_api::sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), keep_pointer);
    if (rc != SQLITE_OK) throw error(rc, what_);
}

void statement::bind_text(int index, std::string_view text) {
    const char* data = text.empty() ? "" : text.data();
    const int rc = sqlite_api::sqlite3_bind_text64(stmt_, index, data, text.size(), keep_pointer, SQLITE_UTF8);
    if (rc != SQLITE_OK) throw error(rc, what_);
}

void statement::bind(int index, std::int64_t value) {
    const int rc = sqlite_api::sqlite3_bind_int64(stmt_, index, value);
    if (rc != SQLITE_OK) throw error(rc, what_);
}

bool statement::step() {
    const int rc = sqlite_api::sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_last_error(db_, what_);
}

void statement::reset() noexcept {
    sqlite_api::sqlite3_reset(stmt_);
    sqlite_api::sqlite3_clear_bindings(stmt_);
}

int statement::column_type(int index) const noexcept {
    return sqlite_api::sqlite3_column_type(stmt_, index);
}

std::optional<std::int64_t> statement::column_int(int index) const noexcept {
    if (column_type(index) != SQLITE_INTEGER) return std::nullopt;
    return sqlite_api::sqlite3_column_int64(stmt_, index);
}

std::optional<std::string_view> statement::column_blob(int index) const noexcept {
    if (column_type(index) != SQLITE_BLOB) return std::nullopt;
    const void* data = sqlite_api::sqlite3_column_blob(stmt_, index);
    const int size = sqlite_api::sqlite3_column_bytes(stmt_, index);
    if (size == 0) return std::string_view();
    return std::string_view(static_cast<const char*>(data), static_cast<std::size_t>(size));
}

std::optional<std::string_view> statement::column_text(int index) const noexcept {
    if (column_type(index) != SQLITE_TEXT) return std::nullopt;
    const unsigned char* data = sqlite_api::sqlite3_column_text(stmt_, index);
    const int size = sqlite_api::sqlite3_column_bytes(stmt_, index);
    return std::string_view(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size));
}

}  // namespace idem::detail::sqlite
