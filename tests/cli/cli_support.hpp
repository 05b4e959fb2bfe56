// Running the real `idem` binary from tests, and SQLite files with records in
// known states to run it on.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "idem/record_key.hpp"
#include "key_hex.hpp"
#include "temp_dir.hpp"

namespace idem::test::cli {

struct outcome {
    int exit_code;    // or 128 + the signal that ended it
    std::string out;  // stdout, byte for byte
    std::string err;
};

// One `PROGRAM ARGS...` started now, its stdout and stderr kept in files apart.
class idem_run {
public:
    idem_run(const std::filesystem::path& scratch, const std::string& program, const std::vector<std::string>& args);
    // Waits (at most a minute) and collects it.
    [[nodiscard]] outcome finish();
    // Sends it `sig` (SIGTERM to stop a long-running command).
    void signal(int sig) { child_->signal(sig); }

private:
    std::filesystem::path out_, err_;
    std::unique_ptr<child_process> child_;
};

// A folder of its own, the database file in it, and `idem` runs on it.
struct workspace {
    temp_dir dir{"idem-cli"};
    std::string db = (dir.path() / "records.db").string();

    // Runs `idem ARGS...` to the end.
    [[nodiscard]] outcome idem(const std::vector<std::string>& args) const;
    [[nodiscard]] std::unique_ptr<idem_run> start(const std::vector<std::string>& args) const;
    // Runs another program (a path, or a name looked up in PATH) to the end.
    [[nodiscard]] outcome run(const std::string& program, const std::vector<std::string>& args) const;

    // `idem migrate` on db (or `url`); REQUIREs success.
    void migrate() const { migrate(db); }
    void migrate(const std::string& url) const;
    // Rows of idem_records matching `where` (SQL), read with plain SQL.
    [[nodiscard]] std::int64_t rows(const std::string& where = "1") const;
    [[nodiscard]] std::int64_t expired_rows() const;
};

// The record key of the n-th record named `prefix`, all in namespace "cli".
[[nodiscard]] inline record_key key_of(const std::string& prefix, int n) {
    return record_key("cli", scope::tenant("acme"), prefix + "-" + std::to_string(n));
}
[[nodiscard]] inline std::string payload_of(const std::string& prefix, int n) {
    return "result of " + prefix + "-" + std::to_string(n);
}

enum class record_kind { in_flight, completed };

// Writes `count` records prefix-0... in one transaction, as if at `at` with a
// lease or retention of `span` (in the past: they are expired now). The
// payload of a completed one is payload_of(prefix, n).
void seed(const std::string& db, const std::string& prefix, int count, record_kind kind,
          std::chrono::system_clock::time_point at, std::chrono::nanoseconds span);

[[nodiscard]] bool contains(const std::string& text, const std::string& part);
// The 64 lowercase hex characters of a record's digest, as `inspect --key-hash` takes it.
using test::digest_hex;
// SQLite's condition for the rows of prefix-0 ... prefix-(count - 1), by their
// primary keys: rows carry no key text.
[[nodiscard]] std::string named(const std::string& prefix, int count);
// How many rows an `idem purge` run reports it purged; REQUIREs that it succeeded.
[[nodiscard]] long long purged(const outcome& r);

// Two `idem purge --batch 50` on `url` started at once; CHECKs that each purged
// some rows and that together they purged `expired`: each row exactly once.
void purge_twice_at_once(const workspace& w, const std::string& url, long long expired);

// Live traffic from another process (cli_worker): keeps reserving fresh keys
// prefix-0, prefix-1, ... on `db` (a SQLite file or a postgresql:// URI),
// completing the even ones and leaving the odd ones in flight with a live lease.
class traffic {
public:
    // Returns once the first record is written.
    traffic(const std::string& db, const std::string& prefix);
    // Records written so far.
    [[nodiscard]] int written();
    struct totals {
        int written;
        int errors;  // writes that failed or found their fresh key taken
    };
    // Stops it and CHECKs that it exited cleanly.
    [[nodiscard]] totals stop();

private:
    child_process worker_;
};

// The first whole number after `word ` in `text`, e.g. number_after("purged 12 rows", "purged")
// == 12.
[[nodiscard]] long long number_after(const std::string& text, const std::string& word);

}  // namespace idem::test::cli
