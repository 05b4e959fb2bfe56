#include "process_tree.hpp"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace idem::test {
namespace {

// Every process's parent, from /proc/PID/stat.
std::multimap<pid_t, pid_t> children_by_parent() {
    std::multimap<pid_t, pid_t> children;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ignored)) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string line;
        if (!std::getline(stat, line)) continue;   // ended meanwhile
        const auto close_paren = line.rfind(')');  // the command name may hold spaces and parentheses
        if (close_paren == std::string::npos) continue;
        std::istringstream rest(line.substr(close_paren + 1));
        char state = 0;
        pid_t parent = 0;
        if (rest >> state >> parent) children.emplace(parent, static_cast<pid_t>(std::stoi(name)));
    }
    return children;
}

}  // namespace

std::vector<pid_t> process_tree(pid_t root) {
    const auto children = children_by_parent();
    std::vector<pid_t> tree{root};
    for (std::size_t i = 0; i < tree.size(); ++i) {
        const auto [first, last] = children.equal_range(tree[i]);
        for (auto it = first; it != last; ++it) tree.push_back(it->second);
    }
    return tree;
}

void signal_tree(pid_t root, int sig) {
    if (sig == SIGCONT) {
        for (const pid_t p : process_tree(root)) ::kill(p, SIGCONT);
        return;
    }
    // Freeze from the top down until the walk finds nobody new: a process
    // started between two walks is frozen by the next.
    std::vector<pid_t> frozen;
    for (;;) {
        const std::vector<pid_t> tree = process_tree(root);
        bool grew = false;
        for (const pid_t p : tree)
            if (std::find(frozen.begin(), frozen.end(), p) == frozen.end()) {
                ::kill(p, SIGSTOP);
                frozen.push_back(p);
                grew = true;
            }
        if (!grew) break;
    }
    if (sig == SIGSTOP) return;
    for (const pid_t p : frozen) ::kill(p, sig);
    if (sig != SIGKILL)
        for (const pid_t p : frozen) ::kill(p, SIGCONT);  // so they act on it
}

}  // namespace idem::test
