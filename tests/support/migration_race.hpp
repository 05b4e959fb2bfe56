// The concurrent-migration test every SQL store runs: worker processes migrate
// one fresh database at one instant, and exactly one of them applies the schema.
#pragma once

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "worker_processes.hpp"

namespace idem::test {

// `worker_args`: the worker command that migrates and prints how many
// migrations it applied, then their names (migrate_from_go in bank_worker.hpp).
inline void race_migrations(const std::vector<std::string>& worker_args, int processes) {
    auto children = start_workers(processes, worker_args);
    release_together(children);
    int applied = 0;
    for (auto& c : children) {
        std::istringstream line(line_of(*c));
        int n = -1;
        line >> n;
        applied += n;
        if (n == 1) {
            std::string name;
            line >> name;
            CHECK(name == "0001_create_records");
        }
        CHECK(exit_code(*c) == 0);
    }
    CHECK(applied == 1);
}

}  // namespace idem::test
