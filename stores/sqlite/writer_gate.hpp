// SQLite lets one connection write a file at a time. The writers of one process
// on a file wait for it in line: each is woken as the one before it ends its
// transaction, instead of polling and sleeping in the busy handler (whose
// pollers also pin the WAL with their read marks, so checkpoints stay partial
// and every commit pays their fsyncs). The busy
// handler is left for writers in other processes (the idem command, a second
// service), which this line cannot see.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "sqlite_native.hpp"

namespace idem::detail::sqlite {

// Not strictly first come, first served: a writer that finds the gate open
// takes it, even past a waiter just woken (a thread that commits and writes again
// goes on without a context switch, which at synchronous NORMAL is worth more than
// its transaction). A waiter that has waited `handoff_after` is handed the gate
// directly instead, so no one waits behind newcomers for long.
class writer_gate {
public:
    using clock = std::chrono::steady_clock;
    static constexpr clock::duration handoff_after = std::chrono::milliseconds(5);

    // Waits for the calling thread's turn until `deadline`; false when it did not come.
    [[nodiscard]] bool enter(clock::time_point deadline);
    // Opens the gate and wakes the longest waiter, or hands it the gate when it has waited long.
    void leave() noexcept;
    // Whether the calling thread holds it: a second connection on the same thread
    // would wait for itself, so it goes straight to SQLite's lock and its busy timeout.
    [[nodiscard]] bool held_by_this_thread();

private:
    struct waiter {
        clock::time_point since;
        std::condition_variable woken;
        bool handed = false;  // the gate was passed to it by leave()
    };
    // Wakes the longest waiter to try for an open gate. The caller holds mutex_.
    void wake_first() noexcept;

    std::mutex mutex_;
    bool held_ = false;
    std::thread::id holder_;
    std::deque<waiter*> line_;
};

// What configure_sqlite_session gave a connection, kept until the connection closes.
struct connection_settings {
    database* db = nullptr;
    std::chrono::milliseconds busy_timeout{0};
    std::shared_ptr<writer_gate> gate;  // one per file; none for a read-only connection or a memory database
};

// Sets the busy handler and the writer gate of `db`, replacing earlier settings.
void attach_settings(database* db, std::chrono::milliseconds busy_timeout, bool read_only);
// nullptr for a connection idem did not configure.
[[nodiscard]] const connection_settings* settings_of(database* db);

// The start of the calling thread's wait for the write lock, in line or in the
// busy handler: both waits together stay within the busy timeout.
void waiting_since(std::optional<writer_gate::clock::time_point> started) noexcept;

}  // namespace idem::detail::sqlite
