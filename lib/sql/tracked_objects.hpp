// The mapped objects of one unit of work, its part of the unit's state
// (idem/detail/unit_state.hpp): the identity map (one object per type and key), a snapshot
// of each object as the database last had it, and what flush writes: INSERTs
// of added objects in the order they were added, UPDATEs of the changed
// columns of changed objects by table and key (so concurrent units of work
// lock rows in one order), DELETEs in the order of remove().
//
// Concurrency: a versioned type is written WHERE version = the snapshot's and
// its version goes up by one; zero rows is a stale_write. An unversioned type
// is read with the dialect's lock clause (FOR UPDATE on PostgreSQL), so nobody
// else can change it before COMMIT. SQLite serialises writers, so neither is
// needed there; the version check still runs.
//
// Savepoints: a flush runs before one opens; a rollback to it puts every object
// tracked before it back as it was then (fields, version, removal) and forgets
// the objects it tracked (they stay valid C++ objects until the unit of work
// ends, but nothing writes them).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "idem/detail/mapped_table.hpp"
#include "idem/detail/unit_state.hpp"
#include "idem/export.hpp"

namespace idem::detail {

// Tests only: false turns the version checks and the row locks off, to show
// the lost updates they prevent. Never call it elsewhere.
IDEM_API void set_concurrency_checks(bool on) noexcept;
[[nodiscard]] bool concurrency_checks() noexcept;

class tracked_objects final : public unit_part {
public:
    explicit tracked_objects(int depth) noexcept : depth_(depth) {}
    ~tracked_objects() override;

    void* find(unit_of_work& uow, const table& type, const cell& key);
    void* add(const table& type, const void* object);
    void remove(const table& type, const void* object);
    void select(unit_of_work& uow, const table& type, std::string_view where, std::span<const parameter> params,
                std::vector<void*>& out);

    void flush(unit_of_work& uow) override;
    void savepoint_opened(int depth) override;
    void savepoint_released(int depth) override;
    void savepoint_rolled_back(int depth) override;

private:
    enum class status { added, loaded, removed, gone };

    struct object_deleter {
        void (*destroy)(void*) noexcept;
        void operator()(void* object) const noexcept { destroy(object); }
    };
    using object = std::unique_ptr<void, object_deleter>;

    struct entity {
        const table* type;
        std::string key;  // the key column's value, as text
        object current;   // what the application holds
        object snapshot;  // as the database has it; null while added and not yet written
        status state;
        int born;  // the savepoint depth it was first tracked at
        std::size_t order;
    };

    // What a savepoint rolled back to restores: each object as it was when it began.
    struct frame {
        int depth;
        std::vector<std::pair<entity*, object>> saved;
    };

    using identity_map = std::unordered_map<std::string, entity*>;

    identity_map& map_of(const table& type);
    entity* lookup(const table& type, const std::string& key);
    entity& track(const table& type, std::string key, object current, object snapshot, status state);
    void* load_row(unit_of_work& uow, const table& type, std::vector<cell>& row);
    void write_changes(unit_of_work& uow, entity& e);
    void forget(entity& e);

    std::unordered_map<std::string_view, identity_map> maps_;  // by type name
    std::vector<std::unique_ptr<entity>> entities_;            // every object tracked, in order
    std::vector<frame> frames_;
    std::size_t next_order_ = 0;
    int depth_;
};

// Reads cells into a new T (`into`), after the checks: mapping_error for a
// NULL where the member is no std::optional, or a value it cannot hold.
void store_row(const table& type, const std::vector<cell>& row, void* into);

}  // namespace idem::detail
