// idem/detail/unit_state.hpp: what a unit of work holds beyond its SQL, for as
// long as its transaction: the session hooks, and one part per feature that
// keeps state there (the mapped objects: lib/sql/tracked_objects.hpp). Not API.
// The runner creates it at the first use (unit_of_work::features()) and drops
// it when the transaction ends, so a unit of work run again starts empty. A
// feature adds its part by type (uow.features().part<my_part>()), and the
// runner tells every part of the transaction's steps: a flush before the
// record, before a savepoint and before COMMIT; savepoints opened, released and
// rolled back; and how the transaction ended.
#pragma once

#include <functional>
#include <memory>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "idem/export.hpp"

namespace idem {
class unit_of_work;
}

namespace idem::detail {

enum class hook_kind : unsigned char { before_commit, after_commit, after_rollback };

// How a transaction ended, as a part is told: in_doubt when its COMMIT was sent
// and not answered (it may have committed or not; no hook runs).
enum class unit_end : unsigned char { committed, rolled_back, in_doubt };

class IDEM_API unit_part {
public:
    virtual ~unit_part() = default;
    // Writes what the part holds back, through uow.sql().
    virtual void flush(unit_of_work& uow) = 0;
    // Savepoint `depth` (1 is the outermost savepoint) opened after a flush,
    // released (after a flush), or rolled back to.
    virtual void savepoint_opened(int depth) { (void)depth; }
    virtual void savepoint_released(int depth) { (void)depth; }
    virtual void savepoint_rolled_back(int depth) { (void)depth; }
    // The transaction ended so (before the after_commit or after_rollback
    // hooks); the part is dropped right after. Must not throw.
    virtual void ended(unit_end how) noexcept { (void)how; }
};

class IDEM_API unit_state {
public:
    // `depth`: the savepoint depth the transaction is at as the state is created.
    explicit unit_state(int depth) noexcept : depth_(depth) {}
    unit_state(const unit_state&) = delete;
    unit_state& operator=(const unit_state&) = delete;

    // The part of type Part (constructed from the current savepoint depth), created on first use.
    template <class Part>
    Part& part() {
        for (auto& [type, held] : parts_)
            if (type == std::type_index(typeid(Part))) return static_cast<Part&>(*held);
        parts_.emplace_back(std::type_index(typeid(Part)), std::make_unique<Part>(depth_));
        return static_cast<Part&>(*parts_.back().second);
    }
    template <class Part>
    [[nodiscard]] Part* part_if_any() noexcept {
        for (auto& [type, held] : parts_)
            if (type == std::type_index(typeid(Part))) return static_cast<Part*>(held.get());
        return nullptr;
    }

    void add_hook(hook_kind kind, std::function<void()> run);

    // Every part, in the order they were created.
    void flush(unit_of_work& uow);
    // Before COMMIT: the flush, the before_commit hooks (each may change more), the flush again.
    void prepare_commit(unit_of_work& uow);
    // The transaction ended: every part is told, then, once it is known to
    // have committed or rolled back, its after_commit or after_rollback hooks
    // run, every one (none in doubt). The first exception a hook throws is
    // rethrown after the last, unless `quiet` (an exception is on its way
    // already, the one that caused the rollback).
    void finish(unit_end how, bool quiet);

    void savepoint_opened(int depth);
    void savepoint_released(int depth);
    void savepoint_rolled_back(int depth);

private:
    struct hook {
        hook_kind kind;
        int depth;  // the savepoint it was added in: a rollback to it drops the hook
        std::function<void()> run;
    };

    std::vector<std::pair<std::type_index, std::unique_ptr<unit_part>>> parts_;
    std::vector<hook> hooks_;
    int depth_;
};

}  // namespace idem::detail
