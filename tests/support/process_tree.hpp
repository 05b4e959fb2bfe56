// Signals to a process and everything it started, however its descendants
// regrouped (PostgreSQL's backends and pg_autoctl's services each lead a
// session of their own, so a process group does not reach them).
//
//   signal_tree(keeper_pid, SIGSTOP);   // the host freezes
//   signal_tree(keeper_pid, SIGCONT);
//   signal_tree(keeper_pid, SIGKILL);   // the host dies: nothing restarts anything
#pragma once

#include <sys/types.h>

#include <vector>

namespace idem::test {

// `root` and its descendants as /proc lists them now.
[[nodiscard]] std::vector<pid_t> process_tree(pid_t root);

// `sig` to the whole tree. The tree is frozen first (SIGSTOP, unless `sig` is
// SIGCONT), so no process in it can start or restart another between the walk
// and the signal: a supervisor killed a moment before its children would
// otherwise restart them.
void signal_tree(pid_t root, int sig);

}  // namespace idem::test
