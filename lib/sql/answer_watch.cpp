#include "sql/answer_watch.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace idem::detail {
namespace {

using clock_type = std::chrono::steady_clock;

struct watched {
    std::uint64_t id;
    int socket;
    std::chrono::milliseconds bound;
    clock_type::time_point since;  // watched from then on
};

// The watcher's state lives as long as the process (never destroyed: its
// thread may still look when static destructors run).
struct watcher {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<watched> sockets;
    std::uint64_t next_id = 1;
    bool running = false;
    std::atomic<std::uint64_t> ended{0};

    // How long the server has sent nothing on the socket: since data last came
    // in, or since the watch began if that is later. (Whether the client is
    // waiting cannot be read from TCP: the kernel stamps sends and receives to
    // the jiffy, so an answer and the next request often share a stamp.)
    static std::chrono::milliseconds silent(const watched& w, clock_type::time_point now) noexcept {
        tcp_info info{};
        socklen_t size = sizeof info;
        if (getsockopt(w.socket, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return {};
        if (info.tcpi_state != 1 /* TCP_ESTABLISHED */) return {};
        const auto watched_for = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.since);
        return std::min(std::chrono::milliseconds(info.tcpi_last_data_recv), watched_for);
    }

    void run() {
        std::unique_lock lock(mutex);
        for (;;) {
            if (sockets.empty()) {
                changed.wait(lock);
                continue;
            }
            // A few looks per bound: a socket is ended within a quarter of its bound after it.
            auto pause = std::chrono::milliseconds(1000);
            for (const watched& w : sockets) pause = std::min(pause, w.bound / 4);
            changed.wait_for(lock, std::max(pause, std::chrono::milliseconds(10)));
            const auto now = clock_type::now();
            for (watched& w : sockets) {
                if (w.socket < 0 || silent(w, now) < w.bound) continue;
                // Under the lock: the registration, and so the socket, cannot end meanwhile.
                ::shutdown(w.socket, SHUT_RDWR);
                w.socket = -1;  // once
                ended.fetch_add(1, std::memory_order_relaxed);
            }
        }
    }

    std::uint64_t add(int socket, std::chrono::milliseconds bound) {
        const std::lock_guard lock(mutex);
        if (!running) {
            std::thread([this] { run(); }).detach();
            running = true;
        }
        const std::uint64_t id = next_id++;
        sockets.push_back({id, socket, bound, clock_type::now()});
        changed.notify_one();
        return id;
    }

    void remove(std::uint64_t id) noexcept {
        const std::lock_guard lock(mutex);
        std::erase_if(sockets, [id](const watched& w) { return w.id == id; });
    }
};

watcher& the_watcher() {
    static watcher* const w = new watcher;  // NOLINT: lives as long as the process, see above
    return *w;
}

bool is_tcp(int socket) noexcept {
    tcp_info info{};
    socklen_t size = sizeof info;
    return socket >= 0 && getsockopt(socket, IPPROTO_TCP, TCP_INFO, &info, &size) == 0;
}

}  // namespace

answer_watch::registration::registration(registration&& other) noexcept : id_(std::exchange(other.id_, 0)) {}

answer_watch::registration& answer_watch::registration::operator=(registration&& other) noexcept {
    if (this != &other) {
        if (id_ != 0) the_watcher().remove(id_);
        id_ = std::exchange(other.id_, 0);
    }
    return *this;
}

answer_watch::registration::~registration() {
    if (id_ != 0) the_watcher().remove(id_);
}

answer_watch::registration answer_watch::watch(int socket, std::chrono::milliseconds bound) {
    if (bound.count() <= 0 || !is_tcp(socket)) return {};
    return registration(the_watcher().add(socket, bound));
}

std::uint64_t answer_watch::ended() noexcept {
    return the_watcher().ended.load(std::memory_order_relaxed);
}

}  // namespace idem::detail
