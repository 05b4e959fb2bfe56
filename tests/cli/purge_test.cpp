// `idem purge` as a process on real SQLite files: what it deletes and what it
// never touches, its bounds, and purges racing live traffic and each other.
#include <doctest/doctest.h>

#include <soci/soci.h>
#include <soci/sqlite3/soci-sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli_support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace idem::test::cli;
using sys = std::chrono::system_clock;

// 300 rows expired 3h ago (half in flight), 200 expired 10 min ago, 100 live (half in flight).
void seed_mix(const workspace& w) {
    w.migrate();
    seed(w.db, "old", 150, record_kind::completed, sys::now() - 4h, 1h);
    seed(w.db, "old-flight", 150, record_kind::in_flight, sys::now() - 3h - 1min, 1min);
    seed(w.db, "recent", 200, record_kind::completed, sys::now() - 1h - 10min, 1h);
    seed(w.db, "live", 50, record_kind::completed, sys::now(), 1h);
    seed(w.db, "live-flight", 50, record_kind::in_flight, sys::now(), 10min);
    REQUIRE(w.rows() == 600);
    REQUIRE(w.expired_rows() == 500);
}

std::int64_t live_rows(const workspace& w) {
    return w.rows(named("live", 50) + " OR " + named("live-flight", 50));
}

}  // namespace

TEST_CASE("purge deletes every expired row, in flight or completed, and no live one") {
    workspace w;
    seed_mix(w);
    const auto r = w.idem({"purge", "--db", w.db});
    CHECK(purged(r) == 500);
    CHECK(contains(r.out, " in 1 batch, "));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);  // one summary line, no progress off a terminal
    CHECK(r.err.empty());
    CHECK(w.rows() == 100);
    CHECK(live_rows(w) == 100);
    CHECK(w.rows("state = 0") == 50);  // the in-flight ones with a live lease stay
    CHECK(purged(w.idem({"purge", "--db", w.db})) == 0);
}

TEST_CASE("purge --dry-run counts and changes nothing") {
    workspace w;
    seed_mix(w);
    auto r = w.idem({"purge", "--db", w.db, "--dry-run"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "would purge 500 rows expired\n");
    r = w.idem({"purge", "--db", w.db, "--dry-run", "--max-rows", "120"});
    CHECK(r.out == "would purge 120 rows expired (of 500; --max-rows)\n");
    r = w.idem({"purge", "--db", w.db, "--dry-run", "--older-than", "1h"});
    CHECK(r.out == "would purge 300 rows expired for over 1h\n");
    CHECK(w.rows() == 600);
    CHECK(w.expired_rows() == 500);
}

TEST_CASE("purge --older-than leaves rows that expired more recently") {
    workspace w;
    seed_mix(w);
    CHECK(purged(w.idem({"purge", "--db", w.db, "--older-than", "1d"})) == 0);
    CHECK(purged(w.idem({"purge", "--db", w.db, "--older-than", "4h"})) == 0);
    auto r = w.idem({"purge", "--db", w.db, "--older-than", "150m"});
    CHECK(purged(r) == 300);
    CHECK(contains(r.out, "rows expired for over 150m"));
    CHECK(w.rows(named("recent", 200)) == 200);
    // In milliseconds: 11 minutes leaves the rows that expired 10 minutes ago, 9 minutes takes them.
    CHECK(purged(w.idem({"purge", "--db", w.db, "--older-than", "660000ms"})) == 0);
    r = w.idem({"purge", "--db", w.db, "--older-than", "540000ms"});
    CHECK(purged(r) == 200);
    CHECK(contains(r.out, "rows expired for over 540000ms"));
    CHECK(w.rows() == 100);
    CHECK(live_rows(w) == 100);
}

TEST_CASE("purge --batch and --max-rows bound each transaction and the whole run") {
    workspace w;
    w.migrate();
    seed(w.db, "old", 1000, record_kind::completed, sys::now() - 2h, 1h);
    auto r = w.idem({"purge", "--db", w.db, "--batch", "100", "--max-rows", "250"});
    CHECK(purged(r) == 250);
    CHECK(contains(r.out, " in 3 batches, "));  // 100 + 100 + 50
    CHECK(contains(r.out, "stopped at --max-rows"));
    CHECK(w.rows() == 750);

    r = w.idem({"purge", "--db", w.db, "--batch", "100"});
    CHECK(purged(r) == 750);
    CHECK(contains(r.out, " in 8 batches, "));  // 7 x 100, then 50: none left
    CHECK(w.rows() == 0);
}

TEST_CASE("purge --progress reports deleted rows, rate and rows left on stderr, rewritten in place") {
    workspace w;
    w.migrate();
    seed(w.db, "old", 400, record_kind::completed, sys::now() - 2h, 1h);
    const auto r = w.idem({"purge", "--db", w.db, "--batch", "100", "--progress"});
    CHECK(purged(r) == 400);
    CHECK(contains(r.err, "\rdeleted 400 rows, "));
    CHECK(contains(r.err, " rows/s, about 0 left"));
    CHECK(r.err.ends_with("\n"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}

TEST_CASE("on a terminal purge shows its progress without being asked") {
    workspace w;
    w.migrate();
    seed(w.db, "old", 300, record_kind::completed, sys::now() - 2h, 1h);
    // script(1) gives idem a pseudo-terminal for stdout and stderr alike.
    const auto r =
        w.run("script", {"-qec", std::string(IDEM_BINARY) + " purge --batch 100 --db '" + w.db + "'", "/dev/null"});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "\rdeleted 300 rows, "));
    CHECK(contains(r.out, "purged 300 rows expired in 4 batches"));
    CHECK(w.rows() == 0);
}

TEST_CASE("bad durations and bounds are usage errors naming the accepted forms; nothing is deleted") {
    workspace w;
    seed_mix(w);
    for (const std::string d : {"5", "m", "ms", "1.5h", "-5m", "5w", "5 m", " 5m", "5M", "5MS", "5sm", "+5m", "0x5m",
                                "", "99999999999999d", "999999999999999999999999s", "9999999999999999ms"}) {
        CAPTURE(d);
        const auto r = w.idem({"purge", "--db", w.db, "--older-than", d});
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        // The flag, the text, what is wrong with it, and the units.
        CHECK(contains(r.err, "--older-than \"" + d + "\" is no duration: "));
        CHECK(contains(r.err, "a whole number followed by ms, s, m, h or d (e.g. 500ms, 30s, 15m, 2h, 7d)"));
    }
    CHECK(contains(w.idem({"purge", "--db", w.db, "--older-than", "5w"}).err, ": \"w\" is no unit;"));
    CHECK(contains(w.idem({"purge", "--db", w.db, "--older-than", "1.5h"}).err, ": the number is not whole;"));
    CHECK(contains(w.idem({"purge", "--db", w.db, "--older-than", "30"}).err, ": it has no unit;"));
    CHECK(contains(w.idem({"purge", "--db", w.db, "--older-than", "99999999999999d"}).err, ": it is too long"));
    for (const auto& args : std::vector<std::vector<std::string>>{{"--batch", "0"},
                                                                  {"--batch", "-1"},
                                                                  {"--batch", "ten"},
                                                                  {"--batch", "100001"},
                                                                  {"--max-rows", "0"},
                                                                  {"--max-rows", "-5"},
                                                                  {"--dry-run", "--older-than", "7"}}) {
        std::vector<std::string> all{"purge", "--db", w.db};
        all.insert(all.end(), args.begin(), args.end());
        const auto r = w.idem(all);
        CAPTURE(args.front());
        CHECK(r.exit_code == 2);
    }
    CHECK(w.rows() == 600);
    for (const std::string ok : {"0s", "500ms", "30s", "15m", "2h", "7d"})
        CHECK(w.idem({"purge", "--db", w.db, "--dry-run", "--older-than", ok}).exit_code == 0);
}

TEST_CASE("purge never touches live rows while another process keeps reserving and completing") {
    workspace w;
    w.migrate();
    const int expired = 20000;
    seed(w.db, "old", expired, record_kind::completed, sys::now() - 2h, 1h);

    traffic live(w.db, "live");
    const int before = live.written();
    const auto started = std::chrono::steady_clock::now();
    const auto r = w.idem({"purge", "--db", w.db, "--batch", "200"});
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    const int after = live.written();
    const auto [written, errors] = live.stop();

    MESSAGE("purge of " << expired << " rows in batches of 200: " << took.count() << " ms; meanwhile the worker wrote "
                        << after - before << " records (" << written << " in all)");
    CHECK(purged(r) == expired);
    CHECK(after > before);  // the traffic went on during the purge
    CHECK(errors == 0);     // and no write of it failed or waited out its busy timeout
    CHECK(w.rows(named("live", written)) == written);
    CHECK(w.rows(named("live", written) + " AND state = 0") == written / 2);  // in flight, lease live: kept
    CHECK(w.rows() == written);
    CHECK(w.expired_rows() == 0);
}

TEST_CASE("two purges at once delete each expired row exactly once") {
    workspace w;
    w.migrate();
    const int expired = 20000;
    seed(w.db, "old", expired, record_kind::completed, sys::now() - 2h, 1h);
    seed(w.db, "live", 100, record_kind::completed, sys::now(), 1h);

    purge_twice_at_once(w, w.db, expired);
    CHECK(w.rows() == 100);
    CHECK(w.expired_rows() == 0);
}

namespace {

std::string journal_mode(const std::string& db) {
    soci::session session(soci::sqlite3, "db=\"" + db + "\"");
    std::string mode;
    session << "PRAGMA journal_mode", soci::into(mode);
    return mode;
}

std::string contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("purge --dry-run and inspect change nothing: not the rows, not the journal mode, not a byte") {
    workspace w;
    seed_mix(w);
    {
        soci::session session(soci::sqlite3, "db=\"" + w.db + "\"");
        session << "PRAGMA journal_mode = DELETE";
    }
    REQUIRE(journal_mode(w.db) == "delete");
    const std::string before = contents(w.db);
    auto r = w.idem({"purge", "--db", w.db, "--dry-run"});
    CHECK(r.out == "would purge 500 rows expired\n");
    r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(key_of("old", 1))});
    CHECK(r.exit_code == 0);
    CHECK(journal_mode(w.db) == "delete");
    CHECK(contents(w.db) == before);
    CHECK(!std::filesystem::exists(w.db + "-wal"));
}

TEST_CASE("purge --progress stopped by --max-rows: \"about N left\" counts the rows it leaves") {
    workspace w;
    w.migrate();
    seed(w.db, "old", 400, record_kind::completed, sys::now() - 2h, 1h);
    const auto r = w.idem({"purge", "--db", w.db, "--batch", "100", "--max-rows", "150", "--progress"});
    CHECK(purged(r) == 150);
    CAPTURE(r.err);
    const std::string last = r.err.substr(r.err.rfind('\r'));
    CHECK(last.starts_with("\rdeleted 150 rows, "));
    CHECK(contains(last, " rows/s, about 250 left"));
    CHECK(!contains(last, "(~"));  // this run has no time left once it stopped
    CHECK(w.rows() == 250);
}
