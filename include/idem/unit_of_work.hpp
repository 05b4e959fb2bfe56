// idem/unit_of_work.hpp: the one type every unit of work is handed: an open
// database transaction that business writes and idem's records share, and a
// session of mapped objects (idem/mapping.hpp) in it.
//
//   auto moved = db.transact([&](idem::unit_of_work& uow) {
//       account& from = uow.get<account>("alice");  // once per unit of work (identity map)
//       from.balance -= 10;                         // written before COMMIT, changed columns only
//       uow.sql() << "INSERT INTO audit (what) VALUES ('debit')";  // SQL stays first-class
//       uow.savepoint([&] { write_optional_audit_row(uow.sql()); });  // may fail alone
//       return true;
//   });
//
// Who hands it out, and what it tracks: docs/database.md, docs/mapping.md.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "idem/export.hpp"
#include "idem/mapping.hpp"
#include "idem/outbox.hpp"

namespace soci {
class session;
}

namespace idem {

enum class transaction_state {
    active,
    committed,
    rolled_back,
    in_doubt,  // a commit or rollback failed midway (e.g. the connection broke): outcome unknown
};

[[nodiscard]] IDEM_API std::string_view to_string(transaction_state state) noexcept;

namespace detail {
class sql_transaction;
class unit_state;
}  // namespace detail

class IDEM_API unit_of_work {
public:
    virtual ~unit_of_work() = default;

    // The session of this transaction: write business SQL here, as with SOCI. The
    // store's statements for the record go through the same session.
    [[nodiscard]] virtual soci::session& sql() = 0;
    [[nodiscard]] virtual transaction_state state() const noexcept = 0;

    // Runs `work` behind a savepoint: released when it returns; when it throws,
    // rolled back to (undoing only what `work` did) and the exception rethrown.
    // Mapped objects follow the database: a rolled-back savepoint puts every
    // tracked object back as it was when the savepoint began, and forgets the
    // objects (and hooks) it added.
    template <class Work>
    decltype(auto) savepoint(Work&& work);

    // Mapped objects (idem/mapping.hpp). Each key gives one object per unit of
    // work (the identity map): loaded at its first get/find/select, then
    // tracked; what changed is written at flush, which runs before the record of
    // db.once, before a savepoint, before COMMIT and when called. A type with a
    // version column is updated WHERE version = the one read; one without is read
    // FOR UPDATE on PostgreSQL. References stay valid until the unit of work ends.

    // The object with this key; not_found when there is no such row.
    template <mapped T>
    [[nodiscard]] T& get(const detail::key_type_t<T>& key) {
        void* found = detail::mapped_session::find(*this, detail::table_of<T>(), detail::key_cell<T>(key));
        if (found == nullptr) detail::mapped_session::throw_not_found(detail::table_of<T>());
        return *static_cast<T*>(found);
    }
    // The same, or nullptr.
    template <mapped T>
    [[nodiscard]] T* find(const detail::key_type_t<T>& key) {
        return static_cast<T*>(detail::mapped_session::find(*this, detail::table_of<T>(), detail::key_cell<T>(key)));
    }
    // Tracks a new object, INSERTed at the next flush; returns the tracked one.
    // std::invalid_argument when this unit of work already tracks its key.
    template <mapped T>
    T& add(T object) {
        return *static_cast<T*>(detail::mapped_session::add(*this, detail::table_of<T>(), &object));
    }
    // DELETEs a tracked object at the next flush (a new one is just forgotten).
    template <mapped T>
    void remove(const T& object) {
        detail::mapped_session::remove(*this, detail::table_of<T>(), &object);
    }
    // Flushes, then returns the tracked objects of the rows `where` selects
    // (SQL after WHERE, with SOCI's :placeholders bound in order to `params`):
    // uow.select<account>("balance < :floor ORDER BY id", 0).
    template <mapped T, class... Params>
    [[nodiscard]] std::vector<std::reference_wrapper<T>> select(std::string_view where, const Params&... params) {
        const detail::parameter bound[] = {detail::parameter_of(params)..., detail::parameter{}};
        std::vector<void*> found;
        detail::mapped_session::select(*this, detail::table_of<T>(), where, bound, sizeof...(Params), found);
        std::vector<std::reference_wrapper<T>> objects;
        objects.reserve(found.size());
        for (void* object : found) objects.emplace_back(*static_cast<T*>(object));
        return objects;
    }
    // Writes every pending change now (INSERTs in add order, UPDATEs by table
    // and key, DELETEs in remove order); stale_write when a version moved on.
    void flush() { detail::mapped_session::flush(*this); }

    // Session events. before_commit hooks run before COMMIT, after the flush
    // (their changes are flushed too); a throw rolls back. after_commit hooks run
    // once the COMMIT is known to have succeeded (never after one in doubt),
    // after_rollback ones once a rollback is known; each is told of this unit of
    // work only, so a unit run again registers them again.
    void before_commit(std::function<void()> hook) {
        detail::mapped_session::hook(*this, detail::hook_kind::before_commit, std::move(hook));
    }
    void after_commit(std::function<void()> hook) {
        detail::mapped_session::hook(*this, detail::hook_kind::after_commit, std::move(hook));
    }
    void after_rollback(std::function<void()> hook) {
        detail::mapped_session::hook(*this, detail::hook_kind::after_rollback, std::move(hook));
    }

    // Outbox (idem/outbox.hpp): writes a message to the outbox table in this
    // transaction (at the next flush, with the mapped objects), so it is relayed
    // if and only if the transaction commits; a savepoint rolled back takes the
    // messages published in it. Returns the message id, one per committed
    // effect: inside db.once derived from the record key, the call and the
    // message's place in the work (the call's reruns keep it), else random.
    // message_too_large when over the limit; std::invalid_argument for an empty
    // or too long topic or ordering key.
    std::string publish(std::string topic, std::string payload) {
        return detail::publish(*this, outgoing_message{.topic = std::move(topic), .payload = std::move(payload)});
    }
    std::string publish(outgoing_message message) { return detail::publish(*this, std::move(message)); }

    // What idem's SQL stores need of the runner (its dialect, per-connection
    // state, the fast path); opaque to applications.
    [[nodiscard]] virtual detail::sql_transaction& internals() noexcept = 0;

    // What idem's features keep for this transaction beside its SQL (the mapped
    // objects, the hooks; idem/detail/unit_state.hpp): made on first use,
    // dropped when the transaction ends. Not API.
    [[nodiscard]] virtual detail::unit_state& features() = 0;
    [[nodiscard]] virtual detail::unit_state* features_if_any() noexcept = 0;

protected:
    // Opens a savepoint and returns its name.
    virtual std::string begin_savepoint() = 0;
    virtual void release_savepoint(const std::string& name) = 0;
    // ROLLBACK TO then RELEASE; a failure marks the transaction in doubt and throws.
    virtual void rollback_to_savepoint(const std::string& name) = 0;
};

template <class Work>
decltype(auto) unit_of_work::savepoint(Work&& work) {
    const std::string name = begin_savepoint();
    try {
        if constexpr (std::is_void_v<std::invoke_result_t<Work&>>) {
            work();
            release_savepoint(name);
        } else {
            decltype(auto) result = work();
            release_savepoint(name);
            return result;
        }
    } catch (...) {
        rollback_to_savepoint(name);
        throw;
    }
}

}  // namespace idem
