// What every benchmark scenario shares: options and the report rows.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.hpp"
#include "idem/execution.hpp"

namespace idem::bench {

struct options {
    std::chrono::milliseconds span{1000};      // one measurement
    int rounds = 5;                            // alternating subject/baseline pairs; medians reported
    std::string sqlite_dir;                    // where SQLite databases go
    std::string postgresql;                    // conninfo; empty: skip PostgreSQL
    std::string mariadb;                       // mariadb:// URL (docs/mariadb.md)
    int clients = 0;                           // scenario pg-clients: connections
    std::size_t steady_rows = 1'000'000;       // steady-state scenarios: records (and ledger lines) prefilled
    std::size_t expired_rows = 0;              // pg-purge, sqlite-layout: of those, expired (0: a tenth)
    std::vector<int> client_counts{1, 8, 16};  // steady-state PostgreSQL: clients per configuration
};

struct row {
    std::string group;
    std::string name;
    std::string subject;
    std::string baseline;
    paired result;
    std::string unit;
    std::string note = {};
};

class report {
public:
    void add(row r);
    // One JSON object per line, for bench/run to build its table from.
    void print_json() const;

private:
    std::vector<row> rows_;
};

// Every measured call must run its operation: a replay or an in-flight answer
// would time a cheaper path than the one named.
template <class Execution>
void require_executed(const Execution& e) {
    if (e.enforce_decision() != execution_status::executed)
        throw std::logic_error("a benchmark call did not execute its operation");
}

void run_memory(const options& o, report& out);
void run_sqlite(const options& o, report& out);
void run_postgresql(const options& o, report& out);
void run_postgresql_clients(const options& o, int clients, report& out);
void run_sqlite_steady(const options& o, report& out);
void run_sqlite_layout(const options& o, report& out);
void run_postgresql_steady(const options& o, report& out);
void run_postgresql_purge(const options& o, report& out);
void run_sqlite_mapping(const options& o, report& out);
void run_postgresql_mapping(const options& o, report& out);
void run_mariadb_steady(const options& o, report& out);

}  // namespace idem::bench
