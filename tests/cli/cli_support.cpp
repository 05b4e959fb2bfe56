#include "cli_support.hpp"

#include <doctest/doctest.h>
#include <soci/soci.h>
#include <sys/wait.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "idem/sqlite_store.hpp"
#include "idem/transaction_runner.hpp"
#include "key_hex.hpp"

namespace idem::test::cli {
namespace {

using namespace std::chrono_literals;

std::string slurp(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::int64_t query_count(const std::string& db, const std::string& sql) {
    soci::session session;
    open_sqlite_session(session, db);
    std::int64_t n = -1;
    session << sql, soci::into(n);
    return n;
}

}  // namespace

idem_run::idem_run(const std::filesystem::path& scratch, const std::string& program,
                   const std::vector<std::string>& args) {
    static std::atomic<int> runs{0};
    const std::string n = std::to_string(++runs);
    out_ = scratch / ("idem-" + n + ".out");
    err_ = scratch / ("idem-" + n + ".err");
    // The shell only redirects ($1, $2); the arguments reach the program exactly as given.
    spawn_options spawn;
    spawn.argv = {"/bin/sh", "-c",          "out=$1 err=$2; shift 2; exec \"$0\" \"$@\" >\"$out\" 2>\"$err\"",
                  program,   out_.string(), err_.string()};
    spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
    child_ = std::make_unique<child_process>(std::move(spawn));
}

outcome idem_run::finish() {
    if (!child_->wait_for_exit(60s)) throw std::runtime_error("idem did not finish within a minute");
    const int status = child_->reap();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out_), slurp(err_)};
}

outcome workspace::idem(const std::vector<std::string>& args) const {
    return start(args)->finish();
}

std::unique_ptr<idem_run> workspace::start(const std::vector<std::string>& args) const {
    return std::make_unique<idem_run>(dir.path(), IDEM_BINARY, args);
}

outcome workspace::run(const std::string& program, const std::vector<std::string>& args) const {
    return idem_run(dir.path(), program, args).finish();
}

void workspace::migrate(const std::string& url) const {
    const auto r = idem({"migrate", "--db", url});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
}

std::int64_t workspace::rows(const std::string& where) const {
    return query_count(db, "SELECT count(*) FROM idem_records WHERE " + where);
}

std::int64_t workspace::expired_rows() const {
    const auto now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
    return rows("expires_at <= " + std::to_string(now.count()));
}

void seed(const std::string& db, const std::string& prefix, int count, record_kind kind,
          std::chrono::system_clock::time_point at, std::chrono::nanoseconds span) {
    sqlite_store store{{.path = db, .time = std::make_shared<manual_clock>(at)}};
    soci::session session;
    open_sqlite_session(session, db);
    transaction_runner runner{session};
    runner.run([&](unit_of_work& tx) {
        for (int n = 0; n < count; ++n) {
            const record_key key = key_of(prefix, n);
            const auto r = store.try_reserve(tx, key, "fp", span);
            if (r.status != reservation_status::reserved)
                throw std::runtime_error("seed: " + key.key_hash() + " taken");
            if (kind == record_kind::completed && !store.complete(tx, key, r.token, "fp", payload_of(prefix, n), span))
                throw std::runtime_error("seed: could not complete " + key.key_hash());
        }
    });
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

std::string named(const std::string& prefix, int count) {
    std::string in;
    for (int n = 0; n < count; ++n) in += (n ? ", X'" : "X'") + idem::test::record_id_hex(key_of(prefix, n)) + "'";
    return "key_hash IN (" + in + ")";
}

long long purged(const outcome& r) {
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return number_after(r.out, "purged");
}

void purge_twice_at_once(const workspace& w, const std::string& url, long long expired) {
    auto first = w.start({"purge", "--db", url, "--batch", "50"});
    auto second = w.start({"purge", "--db", url, "--batch", "50"});
    const long long a = purged(first->finish());
    const long long b = purged(second->finish());
    MESSAGE("two purges with batches of 50: " << a << " + " << b << " rows");
    CHECK(a + b == expired);
    CHECK(a > 0);
    CHECK(b > 0);
}

namespace {

spawn_options worker_options(const std::string& db, const std::string& prefix) {
    spawn_options spawn;
    spawn.argv = {IDEM_CLI_WORKER, "traffic", db, prefix};
    spawn.pipe_stdin = true;
    spawn.pipe_stdout = true;
    return spawn;
}

std::string answer(child_process& worker) {
    auto line = worker.read_line(30s);
    if (!line) throw std::runtime_error("cli_worker ended without answering");
    return *line;
}

}  // namespace

traffic::traffic(const std::string& db, const std::string& prefix) : worker_(worker_options(db, prefix)) {
    if (answer(worker_) != "ready") throw std::runtime_error("cli_worker did not start");
}

int traffic::written() {
    worker_.write("count\n");
    return std::stoi(answer(worker_));
}

traffic::totals traffic::stop() {
    worker_.write("stop\n");
    std::istringstream last(answer(worker_));
    totals t{-1, -1};
    last >> t.written >> t.errors;
    CHECK(worker_.reap() == 0);
    return t;
}

long long number_after(const std::string& text, const std::string& word) {
    const auto at = text.find(word + " ");
    if (at == std::string::npos) throw std::runtime_error("no '" + word + "' in: " + text);
    return std::stoll(text.substr(at + word.size() + 1));
}

}  // namespace idem::test::cli
