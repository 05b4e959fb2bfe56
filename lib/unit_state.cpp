#include "idem/detail/unit_state.hpp"

#include <exception>
#include <stdexcept>

namespace idem::detail {

void unit_state::add_hook(hook_kind kind, std::function<void()> run) {
    if (!run) throw std::invalid_argument("idem: a session hook must be callable");
    hooks_.push_back({kind, depth_, std::move(run)});
}

void unit_state::flush(unit_of_work& uow) {
    // By index: a part's flush may create another part.
    for (std::size_t i = 0; i < parts_.size(); ++i) parts_[i].second->flush(uow);
}

void unit_state::prepare_commit(unit_of_work& uow) {
    flush(uow);
    bool ran = false;
    // By index, and copied: a hook may add hooks (which run too) and so move the vector.
    for (std::size_t i = 0; i < hooks_.size(); ++i) {
        if (hooks_[i].kind != hook_kind::before_commit) continue;
        const std::function<void()> run = hooks_[i].run;
        run();
        ran = true;
    }
    if (ran) flush(uow);
}

void unit_state::finish(unit_end how, bool quiet) {
    for (auto& [type, held] : parts_) held->ended(how);
    if (how == unit_end::in_doubt) return;
    const hook_kind wanted = how == unit_end::committed ? hook_kind::after_commit : hook_kind::after_rollback;
    std::exception_ptr first;
    for (std::size_t i = 0; i < hooks_.size(); ++i) {
        if (hooks_[i].kind != wanted) continue;
        try {
            const std::function<void()> run = hooks_[i].run;
            run();
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first && !quiet) std::rethrow_exception(first);
}

void unit_state::savepoint_opened(int depth) {
    depth_ = depth;
    for (auto& [type, held] : parts_) held->savepoint_opened(depth);
}

void unit_state::savepoint_released(int depth) {
    // What the savepoint added now belongs to the level around it.
    for (hook& h : hooks_)
        if (h.depth >= depth) h.depth = depth - 1;
    for (auto& [type, held] : parts_) held->savepoint_released(depth);
    depth_ = depth - 1;
}

void unit_state::savepoint_rolled_back(int depth) {
    std::erase_if(hooks_, [&](const hook& h) { return h.depth >= depth; });
    for (auto& [type, held] : parts_) held->savepoint_rolled_back(depth);
    depth_ = depth - 1;
}

}  // namespace idem::detail
