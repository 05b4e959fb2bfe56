// idem/error.hpp: the errors idem throws, with questions a caller can act on.
//
// Bad arguments (invalid UTF-8, an empty fingerprint, a negative lease) are
// std::invalid_argument. Everything else derives from idem::error:
//
//   try { store.try_reserve(key, fingerprint, lease); }
//   catch (const idem::store_error& e) {
//       if (e.is_transient()) retry_later();       // lock timeout, connection lost
//       log(e.what(), e.native_code());            // SQLSTATE or SQLite code
//   }
//
// Messages name a record only by its key hash, never by its key or scope.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "idem/export.hpp"

namespace idem {

namespace detail {
struct error_access;
}

enum class error_category {
    store,          // the record store failed (database, network, corrupt row)
    configuration,  // options or wiring that cannot work
    cancelled,      // the caller cancelled before the operation started
    transaction,    // a transaction could not be committed or rolled back
    data,           // a mapped row is missing, or does not fit its mapping
};

class IDEM_API error : public std::runtime_error {
public:
    error(error_category category, const std::string& message) : std::runtime_error(message), category_(category) {}

    [[nodiscard]] error_category category() const noexcept { return category_; }
    // Worth retrying as it is: a lock or statement timeout, a lost connection.
    [[nodiscard]] virtual bool is_transient() const noexcept { return false; }
    // The connection to the server broke; the outcome of the last call is unknown.
    [[nodiscard]] virtual bool is_connection_lost() const noexcept { return false; }
    // The failure ended a database transaction that is known to have rolled back
    // (nothing it wrote remains), so the work may run again at once. Set by
    // idem::database on what it throws out of a unit of work; never set after a
    // COMMIT whose answer was lost (that is transaction_in_doubt).
    [[nodiscard]] bool rolled_back() const noexcept { return rolled_back_; }

private:
    friend struct detail::error_access;  // the one that saw the rollback says so

    error_category category_;
    bool rolled_back_ = false;
};

// What went wrong inside a store, in terms a caller can act on.
enum class store_failure {
    connection_lost,  // the server is unreachable or the connection broke
    timeout,          // lock wait, busy timeout or statement timeout
    conflict,         // serialization failure or deadlock; the transaction is lost
    lost_race,        // a concurrent transaction committed the same record first; this one is lost
    corrupt_record,   // a stored row does not have the shape idem writes
    unsupported,      // the store cannot keep its promise here (e.g. isolation level)
    schema,           // the schema is missing or newer than this library
    constraint,       // a constraint rejected a write (unique, check, foreign key, not null, type)
    other,
};

class IDEM_API store_error : public error {
public:
    store_error(store_failure failure, const std::string& message, std::string native_code = {})
        : error(error_category::store, message), failure_(failure), native_code_(std::move(native_code)) {}

    [[nodiscard]] store_failure failure() const noexcept { return failure_; }
    // SQLSTATE on PostgreSQL, the extended result code on SQLite, empty otherwise.
    [[nodiscard]] const std::string& native_code() const noexcept { return native_code_; }
    [[nodiscard]] bool is_transient() const noexcept override {
        return failure_ == store_failure::connection_lost || failure_ == store_failure::timeout ||
               failure_ == store_failure::conflict || failure_ == store_failure::lost_race;
    }
    [[nodiscard]] bool is_connection_lost() const noexcept override {
        return failure_ == store_failure::connection_lost;
    }

private:
    store_failure failure_;
    std::string native_code_;
};

// A concurrent transaction changed or removed a row this unit of work read
// (its version moved on, or it is gone) before this one wrote it: transient, so
// idem::database runs the whole unit of work again, on what is there now.
class IDEM_API stale_write : public store_error {
public:
    stale_write(std::string type, std::string table)
        : store_error(store_failure::conflict,
                      "idem: a " + type + " (table " + table +
                          ") changed or went away since this unit of work read it; nothing was written"),
          type_(std::move(type)) {}

    // The mapped C++ type, as the compiler names it.
    [[nodiscard]] const std::string& type() const noexcept { return type_; }

private:
    std::string type_;
};

// unit_of_work::get<T>(key) found no row with that key (or the unit of work
// removed it). The key itself is not in the message: it may be a customer's.
class IDEM_API not_found : public error {
public:
    not_found(std::string type, const std::string& table)
        : error(error_category::data, "idem: there is no " + type + " with that key (table " + table + ")"),
          type_(std::move(type)) {}

    [[nodiscard]] const std::string& type() const noexcept { return type_; }

private:
    std::string type_;
};

// A row does not fit its mapping (idem/mapping.hpp): NULL in a member that is
// no std::optional, a value past the member's range or of another kind. Names
// the type and the column, never the value; nothing was read into the object.
class IDEM_API mapping_error : public error {
public:
    mapping_error(std::string type, std::string column, const std::string& why)
        : error(error_category::data, "idem: column " + column + " of " + type + ": " + why),
          type_(std::move(type)),
          column_(std::move(column)) {}

    [[nodiscard]] const std::string& type() const noexcept { return type_; }
    [[nodiscard]] const std::string& column() const noexcept { return column_; }

private:
    std::string type_;
    std::string column_;
};

// Invalid options: every invalid field is named, with why.
class IDEM_API options_error : public error {
public:
    explicit options_error(std::vector<std::string> problems);

    [[nodiscard]] const std::vector<std::string>& problems() const noexcept { return problems_; }

private:
    std::vector<std::string> problems_;
};

// The caller's stop_token fired before the operation started; the key was released.
class IDEM_API operation_cancelled : public error {
public:
    operation_cancelled() : error(error_category::cancelled, "idem: cancelled before the operation started") {}
};

// A commit, rollback or savepoint statement failed.
class IDEM_API transaction_error : public error {
public:
    explicit transaction_error(const std::string& message) : error(error_category::transaction, message) {}
};

// COMMIT was sent and its answer lost (the connection broke): the transaction
// may or may not have committed. Never retried; check the data, then decide.
// The failure that broke the connection is nested (std::rethrow_if_nested).
class IDEM_API transaction_in_doubt : public transaction_error {
public:
    explicit transaction_in_doubt(const std::string& message) : transaction_error(message) {}
    [[nodiscard]] bool is_connection_lost() const noexcept override { return true; }
};

namespace detail {
// For idem::database, which sees a unit of work's transaction roll back and
// marks the error it then rethrows.
struct error_access {
    static void mark_rolled_back(error& e) noexcept { e.rolled_back_ = true; }
};
}  // namespace detail

}  // namespace idem
