#include "sql/tracked_objects.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <tuple>

#include "idem/error.hpp"
#include "sql/mapped_statements.hpp"

namespace idem::detail {
namespace {

std::atomic<bool> checks_on{true};

std::vector<cell> row_of(const table& type, const void* object) {
    std::vector<cell> row(type.size);
    for (std::size_t i = 0; i < type.size; ++i) type.fields[i].read(object, row[i]);
    return row;
}

[[noreturn]] void key_changed(const table& type) {
    throw std::logic_error("idem: the key of a tracked " + std::string(type.type) +
                           " changed; remove() it and add() a new object instead");
}

}  // namespace

void set_concurrency_checks(bool on) noexcept {
    checks_on.store(on);
}

bool concurrency_checks() noexcept {
    return checks_on.load(std::memory_order_relaxed);
}

void store_row(const table& type, const std::vector<cell>& row, void* into) {
    for (std::size_t i = 0; i < type.size; ++i)
        if (row[i].null && !type.fields[i].nullable)
            throw mapping_error(std::string(type.type), type.fields[i].name,
                                "is NULL, and its member is no std::optional");
    for (std::size_t i = 0; i < type.size; ++i)
        if (!type.fields[i].write(into, row[i]))
            throw mapping_error(std::string(type.type), type.fields[i].name, "holds a value past its member's range");
}

tracked_objects::~tracked_objects() = default;

tracked_objects::identity_map& tracked_objects::map_of(const table& type) {
    return maps_[type.type];
}

tracked_objects::entity* tracked_objects::lookup(const table& type, const std::string& key) {
    const auto map = maps_.find(type.type);
    if (map == maps_.end()) return nullptr;
    const auto found = map->second.find(key);
    return found == map->second.end() ? nullptr : found->second;
}

tracked_objects::entity& tracked_objects::track(const table& type, std::string key, object current, object snapshot,
                                                status state) {
    auto e = std::make_unique<entity>(
        entity{&type, std::move(key), std::move(current), std::move(snapshot), state, depth_, next_order_++});
    entity& tracked = *e;
    entities_.push_back(std::move(e));
    map_of(type)[tracked.key] = &tracked;
    return tracked;
}

void tracked_objects::forget(entity& e) {
    e.state = status::gone;
    identity_map& map = map_of(*e.type);
    if (const auto found = map.find(e.key); found != map.end() && found->second == &e) map.erase(found);
}

void* tracked_objects::load_row(unit_of_work&, const table& type, std::vector<cell>& row) {
    object current(type.make(), {type.destroy});
    store_row(type, row, current.get());
    object snapshot(type.copy(current.get()), {type.destroy});
    return track(type, key_text(type, row[type.key]), std::move(current), std::move(snapshot), status::loaded)
        .current.get();
}

void* tracked_objects::find(unit_of_work& uow, const table& type, const cell& key) {
    if (const entity* e = lookup(type, key_text(type, key)))
        return e->state == status::added || e->state == status::loaded ? e->current.get() : nullptr;
    std::vector<cell> row;
    // A type without a version is held until COMMIT instead (where the dialect can).
    const bool lock = !type.versioned() && concurrency_checks();
    if (!mapped_statements::of(uow, type).load(uow, key, lock, row)) return nullptr;
    return load_row(uow, type, row);
}

void* tracked_objects::add(const table& type, const void* object_to_add) {
    cell key;
    type.fields[type.key].read(object_to_add, key);
    std::string text = key_text(type, key);
    if (const entity* e = lookup(type, text); e != nullptr && e->state != status::gone)
        throw std::invalid_argument("idem: this unit of work already tracks a " + std::string(type.type) +
                                    " with that key");
    return track(type, std::move(text), object(type.copy(object_to_add), {type.destroy}),
                 object(nullptr, {type.destroy}), status::added)
        .current.get();
}

void tracked_objects::remove(const table& type, const void* tracked) {
    cell key;
    type.fields[type.key].read(tracked, key);
    entity* e = lookup(type, key_text(type, key));
    if (e == nullptr || e->current.get() != tracked || e->state == status::removed || e->state == status::gone)
        throw std::invalid_argument("idem: remove() takes a " + std::string(type.type) +
                                    " this unit of work tracks (from get, find, select or add)");
    if (e->state == status::added) {  // never written: nothing to delete
        forget(*e);
        return;
    }
    e->state = status::removed;
    e->order = next_order_++;
}

void tracked_objects::select(unit_of_work& uow, const table& type, std::string_view where,
                             std::span<const parameter> params, std::vector<void*>& out) {
    flush(uow);  // the query sees what this unit of work changed
    const bool lock = !type.versioned() && concurrency_checks();
    mapped_statements::of(uow, type).select(uow, where, params, lock, [&](std::vector<cell>& row) {
        // An object this unit of work holds already stays as it is: the same one, with its changes.
        if (const entity* e = lookup(type, key_text(type, row[type.key]))) {
            out.push_back(e->current.get());
            return;
        }
        out.push_back(load_row(uow, type, row));
    });
}

void tracked_objects::write_changes(unit_of_work& uow, entity& e) {
    const table& type = *e.type;
    std::uint64_t changed = 0;
    for (std::size_t i = 0; i < type.size; ++i)
        if (i != type.version && !type.fields[i].equal(e.current.get(), e.snapshot.get()))
            changed |= std::uint64_t{1} << i;
    if (changed == 0) return;
    if ((changed & (std::uint64_t{1} << type.key)) != 0) key_changed(type);
    std::vector<cell> row = row_of(type, e.current.get());
    mapped_statements& statements = mapped_statements::of(uow, type);
    long long written = 0;
    if (type.versioned()) {
        // The version it was read with, whatever the application did to the member.
        cell seen;
        type.fields[type.version].read(e.snapshot.get(), seen);
        cell next = seen;
        ++next.integer;
        row[type.version] = next;
        changed |= std::uint64_t{1} << type.version;
        written = statements.update(uow, changed, row, concurrency_checks() ? &seen : nullptr);
        if (written == 0) throw stale_write(std::string(type.type), std::string(type.name));
        if (!type.fields[type.version].write(e.current.get(), next))
            throw mapping_error(std::string(type.type), type.fields[type.version].name,
                                "cannot go past its member's range");
    } else {
        written = statements.update(uow, changed, row, nullptr);
        if (written == 0) throw stale_write(std::string(type.type), std::string(type.name));
    }
    type.assign(e.snapshot.get(), e.current.get());
}

void tracked_objects::flush(unit_of_work& uow) {
    // New objects, in the order they were added (a row they refer to comes first).
    for (auto& held : entities_) {
        entity& e = *held;
        if (e.state != status::added) continue;
        const std::vector<cell> row = row_of(*e.type, e.current.get());
        if (key_text(*e.type, row[e.type->key]) != e.key) key_changed(*e.type);
        mapped_statements::of(uow, *e.type).insert(uow, row);
        e.snapshot = object(e.type->copy(e.current.get()), {e.type->destroy});
        e.state = status::loaded;
    }
    // Changed objects, by table and key: concurrent units of work take their row locks in one order.
    std::vector<entity*> loaded;
    for (auto& held : entities_)
        if (held->state == status::loaded) loaded.push_back(held.get());
    std::sort(loaded.begin(), loaded.end(), [](const entity* a, const entity* b) {
        return std::tie(a->type->name, a->key) < std::tie(b->type->name, b->key);
    });
    for (entity* e : loaded) write_changes(uow, *e);
    // Removed objects, in the order they were removed.
    std::vector<entity*> removed;
    for (auto& held : entities_)
        if (held->state == status::removed) removed.push_back(held.get());
    std::sort(removed.begin(), removed.end(), [](const entity* a, const entity* b) { return a->order < b->order; });
    for (entity* e : removed) {
        const table& type = *e->type;
        const std::vector<cell> row = row_of(type, e->snapshot.get());
        cell seen;
        if (type.versioned()) type.fields[type.version].read(e->snapshot.get(), seen);
        const bool check = type.versioned() && concurrency_checks();
        if (mapped_statements::of(uow, type).erase(uow, row[type.key], check ? &seen : nullptr) == 0)
            throw stale_write(std::string(type.type), std::string(type.name));
        forget(*e);
    }
}

void tracked_objects::savepoint_opened(int depth) {
    // The flush before the savepoint left every live object as the database has it.
    frame f{depth, {}};
    for (auto& held : entities_)
        if (held->state == status::loaded)
            f.saved.emplace_back(held.get(), object(held->type->copy(held->current.get()), {held->type->destroy}));
    frames_.push_back(std::move(f));
    depth_ = depth;
}

void tracked_objects::savepoint_released(int depth) {
    if (!frames_.empty() && frames_.back().depth == depth) frames_.pop_back();
    for (auto& held : entities_)
        if (held->born >= depth) held->born = depth - 1;
    depth_ = depth - 1;
}

void tracked_objects::savepoint_rolled_back(int depth) {
    for (auto& held : entities_)
        if (held->born >= depth && held->state != status::gone) forget(*held);
    if (!frames_.empty() && frames_.back().depth == depth) {
        for (auto& [e, saved] : frames_.back().saved) {
            e->type->assign(e->current.get(), saved.get());
            e->type->assign(e->snapshot.get(), saved.get());
            e->state = status::loaded;
            map_of(*e->type)[e->key] = e;
        }
        frames_.pop_back();
    }
    depth_ = depth - 1;
}

}  // namespace idem::detail
