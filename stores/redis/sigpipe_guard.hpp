// Keeps a write to a socket the server has closed from killing the process.
//
// hiredis writes with write(2), which raises SIGPIPE on a broken connection. A
// library must not change the process's signal dispositions, so while a guard
// lives SIGPIPE is blocked in the calling thread only, and one it raised is
// consumed before the guard restores the thread's mask (as libpq does).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

namespace idem::redis_detail {

class sigpipe_guard {
public:
    sigpipe_guard() noexcept {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_, &saved_);
        was_pending_ = pending();
    }
    ~sigpipe_guard() {
        if (!was_pending_ && pending()) {
            const timespec now{};
            while (sigtimedwait(&pipe_, nullptr, &now) < 0 && errno == EINTR) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
    }
    sigpipe_guard(const sigpipe_guard&) = delete;
    sigpipe_guard& operator=(const sigpipe_guard&) = delete;

private:
    [[nodiscard]] static bool pending() noexcept {
        sigset_t set;
        sigemptyset(&set);
        return sigpending(&set) == 0 && sigismember(&set, SIGPIPE) == 1;
    }

    sigset_t pipe_{};
    sigset_t saved_{};
    bool was_pending_ = false;
};

}  // namespace idem::redis_detail
