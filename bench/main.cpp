// idem-bench: what idempotency costs, measured against the bare work in the same run.
//   idem-bench [--scenario all|memory|sqlite|postgresql|pg-clients|sqlite-steady|sqlite-layout|pg-steady|pg-purge|
//              mapping-steady|mariadb-steady]
//              [--seconds S] [--rounds N] [--sqlite-dir D] [--postgresql CONNINFO] [--mariadb URL] [--clients N]
//              [--rows N] [--client-counts 1,8,16] [--expired N]
// "all" runs the hot-row scenarios; the steady-state ones prefill their tables
// first (--rows records) and run on their own. mapping-steady: the steady-state
// transfer through mapped objects against the same statements by hand (SQLite,
// and PostgreSQL with --postgresql). sqlite-layout: idem's SQLite file with and
// without the expires_at index (--rows records, --expired of them expired).
// mariadb-steady: the steady-state transfer on MariaDB (--mariadb URL).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "bench.hpp"

namespace idem::bench {

void report::add(row r) {
    std::fprintf(stderr, "%-10s %-55s %12.0f %s vs %12.0f  time ratio %.3f\n", r.group.c_str(), r.name.c_str(),
                 r.result.subject.per_second, r.unit.c_str(), r.result.baseline.per_second, r.result.time_ratio());
    rows_.push_back(std::move(r));
}

void report::print_json() const {
    const auto quoted = [](const std::string& s) {
        std::string out = "\"";
        for (char c : s) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        return out + "\"";
    };
    for (const auto& r : rows_) {
        // A row that only reports (a purge's note) has no rates: its ratio is null, not NaN, which JSON lacks.
        const double ratio = r.result.time_ratio();
        char ratio_text[32] = "null";
        if (std::isfinite(ratio)) std::snprintf(ratio_text, sizeof ratio_text, "%.4f", ratio);
        std::printf(
            "{\"group\":%s,\"name\":%s,\"subject\":%s,\"baseline\":%s,\"subject_per_s\":%.1f,"
            "\"baseline_per_s\":%.1f,\"time_ratio\":%s,\"unit\":%s,\"note\":%s}\n",
            quoted(r.group).c_str(), quoted(r.name).c_str(), quoted(r.subject).c_str(), quoted(r.baseline).c_str(),
            r.result.subject.per_second, r.result.baseline.per_second, ratio_text, quoted(r.unit).c_str(),
            quoted(r.note).c_str());
    }
}

}  // namespace idem::bench

int main(int argc, char** argv) {
    idem::bench::options o;
    std::string scenario = "all";
    o.sqlite_dir = std::filesystem::temp_directory_path().string();
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--scenario")
            scenario = value;
        else if (flag == "--seconds")
            o.span = std::chrono::milliseconds(static_cast<long>(std::stod(value) * 1000));
        else if (flag == "--rounds")
            o.rounds = std::stoi(value);
        else if (flag == "--sqlite-dir")
            o.sqlite_dir = value;
        else if (flag == "--postgresql")
            o.postgresql = value;
        else if (flag == "--mariadb")
            o.mariadb = value;
        else if (flag == "--clients")
            o.clients = std::stoi(value);
        else if (flag == "--rows")
            o.steady_rows = std::stoull(value);
        else if (flag == "--expired")
            o.expired_rows = std::stoull(value);
        else if (flag == "--client-counts") {
            o.client_counts.clear();
            for (std::size_t at = 0; at < value.size();) {
                const std::size_t comma = std::min(value.find(',', at), value.size());
                o.client_counts.push_back(std::stoi(value.substr(at, comma - at)));
                at = comma + 1;
            }
        } else {
            std::cerr << "unknown flag " << flag << "\n";
            return 2;
        }
    }
    idem::bench::report out;
    if (scenario == "all" || scenario == "memory") idem::bench::run_memory(o, out);
#ifdef IDEM_BENCH_SQLITE
    if (scenario == "all" || scenario == "sqlite") idem::bench::run_sqlite(o, out);
    if (scenario == "sqlite-steady") idem::bench::run_sqlite_steady(o, out);
    if (scenario == "sqlite-layout") idem::bench::run_sqlite_layout(o, out);
    if (scenario == "mapping-steady") idem::bench::run_sqlite_mapping(o, out);
#endif
#ifdef IDEM_BENCH_POSTGRESQL
    if ((scenario == "all" || scenario == "postgresql") && !o.postgresql.empty()) idem::bench::run_postgresql(o, out);
    if (scenario == "pg-clients") idem::bench::run_postgresql_clients(o, o.clients, out);
    if (scenario == "pg-steady") idem::bench::run_postgresql_steady(o, out);
    if (scenario == "pg-purge") idem::bench::run_postgresql_purge(o, out);
    if (scenario == "mapping-steady" && !o.postgresql.empty()) idem::bench::run_postgresql_mapping(o, out);
#endif
#ifdef IDEM_BENCH_MARIADB
    if (scenario == "mariadb-steady") idem::bench::run_mariadb_steady(o, out);
#endif
    out.print_json();
    return 0;
}
