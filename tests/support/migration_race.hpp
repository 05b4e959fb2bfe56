// The concurrent-migration test every SQL store runs: worker processes migrate
// one fresh database at one instant, and exactly one of them applies the schema
// (every migration, in order); the others apply nothing.
#pragma once

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "worker_processes.hpp"

namespace idem::test {

// `worker_args`: the worker command that migrates and prints how many
// migrations it applied, then their names (migrate_from_go in bank_worker.hpp);
// `migrations`: the store's, in order.
inline void race_migrations(const std::vector<std::string>& worker_args, int processes,
                            const std::vector<std::string>& migrations) {
    auto children = start_workers(processes, worker_args);
    release_together(children);
    int applying = 0;
    for (auto& c : children) {
        std::istringstream line(line_of(*c));
        int n = -1;
        line >> n;
        if (n > 0) {
            ++applying;
            std::vector<std::string> names(static_cast<std::size_t>(n));
            for (auto& name : names) line >> name;
            CHECK(names == migrations);
        }
        CHECK(exit_code(*c) == 0);
    }
    CHECK(applying == 1);
}

}  // namespace idem::test
