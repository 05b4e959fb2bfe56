// The operator's work on the operations' and the outbox's tables
// (idem/table_admin.hpp): the tables' own statements (operations_table,
// outbox_table), each call a READ COMMITTED transaction on the one session.
#include "idem/table_admin.hpp"

#include <soci/soci.h>

#include <chrono>
#include <stdexcept>

#include "idem/transaction_runner.hpp"
#include "internal/crypto.hpp"
#include "sql/operations_table.hpp"
#include "sql/outbox_table.hpp"
#include "sql/record_id.hpp"
#include "sql/soci_errors.hpp"

namespace idem {

namespace operations = detail::operations_table;
namespace outbox = detail::outbox_table;

struct table_admin::state {
    soci::session session;
    std::optional<bool> has_operations, has_outbox;  // asked once: a migration does not go back

    // work(session) in one transaction; a driver's error as store_error.
    template <class Work>
    auto run(std::string_view what, Work&& work) {
        try {
            transaction_runner runner(session, {.isolation = isolation_level::read_committed});
            return runner.run([&](unit_of_work& uow) { return work(uow); });
        } catch (const soci::soci_error&) {
            detail::rethrow_soci_as_store_error(what, &session);
        }
    }

    bool operations_exist() {
        if (!has_operations)
            has_operations = run("reading operations", [](unit_of_work& uow) { return operations::exists(uow.sql()); });
        return *has_operations;
    }
    bool outbox_exists() {
        if (!has_outbox)
            has_outbox = run("reading the outbox", [](unit_of_work& uow) { return outbox::exists(uow.sql()); });
        return *has_outbox;
    }
};

namespace {

std::string operation_id(std::span<const std::byte> digest) {
    return detail::hex(detail::record_id_of(digest));
}

std::int64_t milliseconds(duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

table_admin::table_admin(const opened_store& store) : state_(std::make_unique<state>()) {
    if (!store.open_session) throw std::invalid_argument("idem: table_admin needs a SQL store's opened_store");
    store.open_session(state_->session);
}

table_admin::table_admin(table_admin&&) noexcept = default;
table_admin& table_admin::operator=(table_admin&&) noexcept = default;
table_admin::~table_admin() = default;

bool table_admin::has_operations() {
    return state_->operations_exist();
}

bool table_admin::has_outbox() {
    return state_->outbox_exists();
}

std::optional<operation_state> table_admin::operation(std::span<const std::byte> digest) {
    const std::string id = operation_id(digest);
    if (!has_operations()) return std::nullopt;
    return state_->run("reading operations", [&](unit_of_work& uow) { return operations::read(uow.sql(), id); });
}

std::vector<operation_state> table_admin::unfinished_operations(std::string_view name_space, std::size_t limit) {
    if (limit < 1 || limit > 10000) throw std::invalid_argument("idem: unfinished_operations lists 1 to 10000");
    if (!has_operations()) return {};
    return state_->run("reading operations",
                       [&](unit_of_work& uow) { return operations::unfinished(uow.sql(), name_space, limit); });
}

release_outcome table_admin::release_operation(std::span<const std::byte> digest, bool compensate) {
    const std::string id = operation_id(digest);
    if (!has_operations()) return release_outcome::not_found;
    return state_->run("releasing an operation",
                       [&](unit_of_work& uow) { return operations::release(uow.sql(), id, compensate); });
}

std::size_t table_admin::count_expired_operations(duration older_than) {
    if (!has_operations()) return 0;
    return state_->run("counting operations", [&](unit_of_work& uow) {
        return operations::count_expired(uow.sql(), milliseconds(older_than));
    });
}

std::size_t table_admin::purge_operations(std::size_t limit, duration older_than) {
    if (limit == 0 || !has_operations()) return 0;
    return state_->run("purging operations", [&](unit_of_work& uow) {
        return operations::purge(uow.sql(), limit, milliseconds(older_than));
    });
}

std::size_t table_admin::count_delivered_messages(duration older_than) {
    if (!has_outbox()) return 0;
    const std::int64_t before = outbox::now_ms() - milliseconds(older_than);
    return state_->run("counting outbox messages",
                       [&](unit_of_work& uow) { return outbox::count_delivered(uow.sql(), before); });
}

std::size_t table_admin::purge_delivered_messages(std::size_t limit, duration older_than) {
    if (limit == 0 || !has_outbox()) return 0;
    const std::int64_t before = outbox::now_ms() - milliseconds(older_than);
    return state_->run("purging outbox messages", [&](unit_of_work& uow) { return outbox::purge(uow, limit, before); });
}

}  // namespace idem
