// What every benchmark scenario shares: options and the report rows.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "harness.hpp"

namespace idem::bench {

struct options {
    std::chrono::milliseconds span{1000};  // one measurement
    int rounds = 5;                        // alternating subject/baseline pairs; medians reported
    std::string sqlite_dir;                // where SQLite databases go
    std::string postgresql;                // conninfo; empty: skip PostgreSQL
    int clients = 0;                       // scenario pg-clients: connections
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

void run_memory(const options& o, report& out);
void run_sqlite(const options& o, report& out);
void run_postgresql(const options& o, report& out);
void run_postgresql_clients(const options& o, int clients, report& out);

}  // namespace idem::bench
