#include "writer_gate.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace idem::detail::sqlite {
namespace {

using namespace std::chrono_literals;

// The start of this thread's current wait for the write lock: set when it joins
// a line, so the busy handler after it counts from there.
thread_local std::optional<writer_gate::clock::time_point> wait_started;

// SQLite's own busy handler sleeps 1, 2, 5, 10... ms between attempts, while a
// write transaction here usually holds the lock for tens of microseconds. This
// one starts at 20 us and backs off to 1 ms. A thread waits on one lock at a
// time, so the start of its current wait can live in the thread.
int wait_while_busy(void* context, int count) {
    const auto& settings = *static_cast<const connection_settings*>(context);
    thread_local writer_gate::clock::time_point started;
    const auto now = writer_gate::clock::now();
    if (count == 0) started = wait_started.value_or(now);
    const auto left = started + settings.busy_timeout - now;
    if (left <= 0s) return 0;
    const auto pause = std::min<writer_gate::clock::duration>(20us * (1 << std::min(count, 6)), 1ms);
    std::this_thread::sleep_for(std::min(pause, left));
    return 1;
}

struct registry {
    std::mutex mutex;
    std::unordered_map<database*, connection_settings*> settings;
    std::unordered_map<std::string, std::weak_ptr<writer_gate>> gates;  // by file name
};

registry& the_registry() {
    static registry* r = new registry;  // never destroyed: connections may close during exit
    return *r;
}

std::shared_ptr<writer_gate> gate_for(registry& r, const std::string& file) {
    std::weak_ptr<writer_gate>& slot = r.gates[file];
    std::shared_ptr<writer_gate> gate = slot.lock();
    if (!gate) {
        std::erase_if(r.gates, [](const auto& entry) { return entry.second.expired(); });
        gate = std::make_shared<writer_gate>();
        r.gates[file] = gate;
    }
    return gate;
}

// Called by SQLite when the connection closes, or when the settings are replaced.
void drop_settings(void* p) {
    auto* settings = static_cast<connection_settings*>(p);
    {
        registry& r = the_registry();
        const std::lock_guard lock(r.mutex);
        if (auto it = r.settings.find(settings->db); it != r.settings.end() && it->second == settings)
            r.settings.erase(it);
    }
    delete settings;
}

void nothing(sqlite_api::sqlite3_context* context, int, sqlite_api::sqlite3_value**) {
    sqlite_api::sqlite3_result_null(context);
}

}  // namespace

bool writer_gate::enter(clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (!held_) {
        held_ = true;
        holder_ = std::this_thread::get_id();
        return true;
    }
    waiter me;
    me.since = clock::now();
    line_.push_back(&me);
    for (;;) {
        const bool timed_out = me.woken.wait_until(lock, deadline) == std::cv_status::timeout;
        if (me.handed) break;  // leave() took it out of the line
        if (!held_ && line_.front() == &me) {
            held_ = true;
            line_.pop_front();
            break;
        }
        if (timed_out && clock::now() >= deadline) {
            std::erase(line_, &me);
            if (!held_) wake_first();  // the gate is open: the next in line may take it
            return false;
        }
    }
    holder_ = std::this_thread::get_id();
    return true;
}

void writer_gate::leave() noexcept {
    const std::lock_guard lock(mutex_);
    holder_ = {};
    if (!line_.empty() && clock::now() - line_.front()->since >= handoff_after) {
        waiter* next = line_.front();
        line_.pop_front();
        next->handed = true;  // held_ stays set: the gate passes to it
        next->woken.notify_one();
        return;
    }
    held_ = false;
    wake_first();
}

void writer_gate::wake_first() noexcept {
    if (!line_.empty()) line_.front()->woken.notify_one();
}

bool writer_gate::held_by_this_thread() {
    const std::lock_guard lock(mutex_);
    return held_ && holder_ == std::this_thread::get_id();
}

void attach_settings(database* db, std::chrono::milliseconds busy_timeout, bool read_only) {
    auto settings = std::make_unique<connection_settings>();
    settings->db = db;
    settings->busy_timeout = busy_timeout;
    registry& r = the_registry();
    const char* file = sqlite_api::sqlite3_db_filename(db, "main");
    if (!read_only && file != nullptr && *file != '\0') {
        const std::lock_guard lock(r.mutex);
        settings->gate = gate_for(r, file);
    }
    // A function that does nothing, only for its destructor: SQLite calls it when
    // the connection closes (or when this call fails), and the settings go with it.
    connection_settings* kept = settings.release();
    const int rc = sqlite_api::sqlite3_create_function_v2(db, "idem_connection_settings", 0, SQLITE_UTF8, kept, nothing,
                                                          nullptr, nullptr, drop_settings);
    if (rc != SQLITE_OK) throw_last_error(db, "keeping the connection's settings");
    {
        const std::lock_guard lock(r.mutex);
        r.settings[db] = kept;
    }
    sqlite_api::sqlite3_busy_handler(db, wait_while_busy, kept);
}

const connection_settings* settings_of(database* db) {
    registry& r = the_registry();
    const std::lock_guard lock(r.mutex);
    const auto it = r.settings.find(db);
    return it == r.settings.end() ? nullptr : it->second;
}

void waiting_since(std::optional<writer_gate::clock::time_point> started) noexcept {
    wait_started = started;
}

}  // namespace idem::detail::sqlite
