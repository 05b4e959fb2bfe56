// Runs a program against PostgreSQL: a throwaway server (or IDEM_TEST_POSTGRES),
// its connection string in place of every "@conninfo@" argument; exits with
// the program's status, after the server is gone.
//
//   run_with_postgres idem-transfer --db @conninfo@
#include <sys/wait.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "postgres_server.hpp"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: run_with_postgres PROGRAM [ARGS...]   (@conninfo@ becomes the connection string)\n";
        return 2;
    }
    try {
        const std::string conninfo = idem::test::shared_postgres();
        idem::test::spawn_options spawn;
        for (int i = 1; i < argc; ++i)
            spawn.argv.emplace_back(std::string(argv[i]) == "@conninfo@" ? conninfo : argv[i]);
        idem::test::child_process program(std::move(spawn));
        if (!program.wait_for_exit(std::chrono::minutes(2))) {
            std::cerr << "run_with_postgres: " << argv[1] << " did not finish within 2 minutes\n";
            return 1;
        }
        const int status = program.reap();
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } catch (const std::exception& e) {
        std::cerr << "run_with_postgres: " << e.what() << "\n";
        return 1;
    }
}
