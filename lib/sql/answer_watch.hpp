// Ends the connection of an open transaction whose server has sent nothing
// for longer than a bound.
//
// A server whose process is stopped (SIGSTOP, a paused VM, a host frozen
// under memory pressure) still has its kernel acknowledge what is sent and
// answer keepalive probes, so neither keepalives nor tcp_user_timeout ever end
// such a connection, and a unit of work would wait on it for good while its
// cluster promotes another server. One thread in the process looks at the TCP
// state of the sockets of the transactions open now (TCP_INFO: when data last
// came in) a few times per bound, and shuts down (shutdown(2)) one whose
// server has been silent longer than its bound, counted from the watch's
// start at the earliest. The driver's read fails at once, and the unit of work
// ends as on a lost connection: run again on a new one, or in doubt when its
// COMMIT had been sent. A statement that runs that long on a healthy server,
// or a transaction left idle that long between statements, is ended too.
//
//   auto watched = answer_watch::watch(PQsocket(conn), std::chrono::seconds(30));
//   ... the transaction's statements ...
//   watched = {};  // before the socket can close
#pragma once

#include <chrono>
#include <cstdint>

#include "idem/export.hpp"

namespace idem::detail {

class IDEM_API answer_watch {
public:
    // Watching one socket until it is destroyed or reassigned; empty: nothing watched.
    class [[nodiscard]] registration {
    public:
        registration() noexcept = default;
        registration(registration&& other) noexcept;
        registration& operator=(registration&& other) noexcept;
        ~registration();
        registration(const registration&) = delete;
        registration& operator=(const registration&) = delete;

    private:
        friend class answer_watch;
        explicit registration(std::uint64_t id) noexcept : id_(id) {}
        std::uint64_t id_ = 0;
    };

    // Watches `socket` while the registration lives, from now: a connected TCP
    // socket (a Unix socket or -1 is not watched), with `bound` above zero. The
    // socket must stay open as long as the registration.
    static registration watch(int socket, std::chrono::milliseconds bound);

    // Connections ended so far in this process.
    [[nodiscard]] static std::uint64_t ended() noexcept;
};

}  // namespace idem::detail
