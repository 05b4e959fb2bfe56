// Cleans up after a test process however it ends.
//
// A child process, in a session of its own, that waits on a socket whose other
// end only this process holds. When the socket closes (a normal exit, a crash,
// SIGKILL, a timeout that killed the test's process group) it SIGKILLs the
// process groups it was told to watch and removes the folder, then exits.
#pragma once

#include <sys/types.h>

#include <filesystem>

namespace idem::test {

class watchdog {
public:
    explicit watchdog(std::filesystem::path dir);
    // Closes the socket, so the watchdog cleans what is left, and waits for it.
    ~watchdog();
    watchdog(const watchdog&) = delete;
    watchdog& operator=(const watchdog&) = delete;

    // Kill this process group (a server and its children) if this process dies.
    void watch(pid_t group);
    // The group ended normally: forget it before its leader is reaped, so its id is never reused meanwhile.
    void forget(pid_t group);

private:
    void send(char op, pid_t group);

    pid_t pid_ = -1;
    int socket_ = -1;
};

}  // namespace idem::test
