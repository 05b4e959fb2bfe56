// `idem migrate`, `idem inspect` and `idem forget` as processes on real SQLite
// files; --db forms; bad input changes nothing; databases that cannot be opened.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <utility>

#include "cli_support.hpp"
#include "idem/error.hpp"
#include "idem/sqlite_store.hpp"
#include "key_hex.hpp"

namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using namespace idem::test::cli;
using sys = std::chrono::system_clock;

// `idem COMMAND --db DB`, with the --key-hash inspect needs.
std::vector<std::string> on(const std::string& command, const std::string& db) {
    std::vector<std::string> args{command, "--db", db};
    if (command == "inspect") args.insert(args.end(), {"--key-hash", std::string(64, 'a')});
    return args;
}

}  // namespace

TEST_CASE("migrate applies the schema once; a second run applies nothing and still exits 0") {
    workspace w;
    auto r = w.idem({"migrate", "--db", "sqlite:" + w.db});
    CHECK(r.exit_code == 0);
    CHECK(r.out ==
          "applied 0001_create_records\napplied 0002_lean_records\napplied 0003_outbox\napplied 0004_steps\napplied "
          "0005_completer\n"
          "applied 0006_outbox_claim_order\napplied 0007_operation_failures\napplied 0008_outbox_lean\napplied "
          "0009_outbox_intake\napplied 0010_tombstones\napplied 0011_scope_ids\n");
    CHECK(w.rows() == 0);

    r = w.idem({"migrate", "--db", w.db});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "nothing to apply: the schema is up to date\n");
}

TEST_CASE("--db accepts sqlite:PATH, sqlite:///PATH and paths ending in .db, .sqlite, .sqlite3") {
    workspace w;
    const auto base = w.dir.path();
    for (const std::string& url :
         {"sqlite:" + (base / "a").string(), "sqlite://" + (base / "b.data").string(), (base / "c.db").string(),
          (base / "d.sqlite").string(), (base / "e.sqlite3").string()}) {
        CAPTURE(url);
        const auto r = w.idem({"migrate", "--db", url});
        CHECK(r.exit_code == 0);
        CHECK(r.out ==
              "applied 0001_create_records\napplied 0002_lean_records\napplied 0003_outbox\napplied "
              "0004_steps\napplied 0005_completer\n"
              "applied 0006_outbox_claim_order\napplied 0007_operation_failures\napplied 0008_outbox_lean\napplied "
              "0009_outbox_intake\napplied 0010_tombstones\napplied 0011_scope_ids\n");
    }
    CHECK(std::filesystem::exists(base / "a"));
    CHECK(std::filesystem::exists(base / "b.data"));
}

TEST_CASE("--db: anything else is a usage error naming the accepted forms, and never echoes the URL") {
    workspace w;
    for (const std::string url : {"xyz://root:secret@localhost/app", "records.txt", "",
                                  "sqlite:", "sqlite://relative.db", "https://example.com/x.db"}) {
        CAPTURE(url);
        for (const char* command : {"migrate", "purge", "inspect"}) {
            const auto r = w.idem(on(command, url));
            CHECK(r.exit_code == 2);
            CHECK(r.out.empty());
            CHECK(contains(r.err, "sqlite:PATH"));
            CHECK(contains(r.err, "postgresql://"));
            CHECK(!contains(r.err, "secret"));
        }
    }
    // Nothing was created along the way.
    CHECK(!std::filesystem::exists(w.dir.path() / "records.txt"));
}

TEST_CASE("postgresql:// and postgres:// URLs are recognised; this build's answer is documented") {
    workspace w;
    for (const std::string url :
         {"postgresql://idem:secret@127.0.0.1:1/idem", "postgres://idem:secret@127.0.0.1:1/idem"}) {
        const auto r = w.idem({"purge", "--db", url});
        CAPTURE(r.err);
        CHECK(!contains(r.err, "secret"));
#if IDEM_CLI_POSTGRESQL
        CHECK(r.exit_code == 1);  // nothing listens on port 1
#else
        CHECK(r.exit_code == 2);
        CHECK(contains(r.err, "unknown scheme (postgres"));
#endif
    }
}

TEST_CASE("a database that cannot be opened is a database error (exit 1), and nothing is created") {
    workspace w;
    const auto missing = (w.dir.path() / "missing.db").string();
    for (const char* command : {"purge", "inspect"}) {
        const auto r = w.idem(on(command, missing));
        CAPTURE(r.err);
        CHECK(r.exit_code == 1);
        CHECK(contains(r.err, "no SQLite database"));
    }
    CHECK(!std::filesystem::exists(missing));

    // A directory that does not exist: migrate cannot create the file.
    auto r = w.idem({"migrate", "--db", "sqlite:" + (w.dir.path() / "no-such-dir" / "x.db").string()});
    CHECK(r.exit_code == 1);
    CHECK(!r.err.empty());

    // A file that is not a database.
    const auto text = w.dir.path() / "notes.db";
    std::ofstream(text) << "not the pages of a database, just text long enough to be read as a header\n";
    for (const char* command : {"migrate", "purge", "inspect"}) {
        r = w.idem(on(command, text.string()));
        CAPTURE(command);
        CAPTURE(r.err);
        CHECK(r.exit_code == 1);
    }

    // A database without the schema: purge and inspect say so rather than create it.
    const auto empty = (w.dir.path() / "empty.db").string();
    {
        soci::session s;
        idem::open_sqlite_session(s, empty);
    }
    for (const char* command : {"purge", "inspect"}) {
        r = w.idem(on(command, empty));
        CAPTURE(r.err);
        CHECK(r.exit_code == 1);
    }
}

TEST_CASE("inspect shows an in-flight record: lease left, no payload") {
    workspace w;
    w.migrate();
    seed(w.db, "flight", 1, record_kind::in_flight, sys::now(), 10min);
    const auto k = key_of("flight", 0);
    const auto r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(k)});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "key hash:       " + k.key_hash() + "\n"));
    CHECK(contains(r.out, "digest:         " + digest_hex(k) + "\n"));
    CHECK(contains(r.out, "SQL key_hash:   " + idem::test::record_id_hex(k) + "\n"));
    CHECK(contains(r.out, "namespace:      cli\n"));
    CHECK(contains(r.out, "state:          in flight\n"));
    CHECK(contains(r.out, "lease until:    "));
    CHECK(contains(r.out, "lease left:     9m "));
    CHECK(contains(r.out, "payload:        none (in flight)\n"));
    // Never the key or the scope.
    CHECK(!contains(r.out, "flight-0"));
    CHECK(!contains(r.out, "acme"));

    const auto with_payload = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(k), "--payload"});
    CHECK(with_payload.exit_code == 0);
    CHECK(with_payload.out.empty());
    CHECK(contains(with_payload.err, "state:          in flight\n"));

    // The same record by the 32 characters of key_hash a SQL table shows.
    const auto by_row = w.idem({"inspect", "--db", w.db, "--key-hash", idem::test::record_id_hex(k)});
    CAPTURE(by_row.err);
    CHECK(by_row.exit_code == 0);
    CHECK(contains(by_row.out, "key hash:       " + k.key_hash() + "\n"));
    CHECK(!contains(by_row.out, "digest:"));
    CHECK(contains(by_row.out, "SQL key_hash:   " + idem::test::record_id_hex(k) + "\n"));
    CHECK(contains(by_row.out, "state:          in flight\n"));
    const auto absent = w.idem({"inspect", "--db", w.db, "--key-hash", std::string(32, '0')});
    CHECK(absent.exit_code == 3);
    CHECK(contains(absent.err, "SQL key_hash 00000000000000000000000000000000"));
}

TEST_CASE("inspect shows a completed record; the payload only with --payload, byte for byte") {
    workspace w;
    w.migrate();
    const auto k = key_of("paid", 0);
    const std::string payload = "{\"receipt\":\"r-1\"}\0\xff\xfe binary\r\n"s;  // NUL inside: the s suffix keeps it
    {
        idem::sqlite_store store{{.path = w.db, .migrate_on_open = false}};
        const auto r = store.try_reserve(k, "fp", 1min);
        REQUIRE(store.complete(k, r.token, "fp", payload, 24h));
    }
    const auto r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(k)});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "state:          completed\n"));
    CHECK(contains(r.out, "retained until: "));
    CHECK(contains(r.out, "retention left: 23h 59m\n"));
    CHECK(contains(r.out, "payload:        29 bytes\n"));
    CHECK(!contains(r.out, "receipt"));

    // Uppercase hex is the same digest; the payload goes to stdout alone.
    std::string upper = digest_hex(k);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const auto p = w.idem({"inspect", "--db", w.db, "--key-hash", upper, "--payload"});
    CHECK(p.exit_code == 0);
    CHECK(p.out == payload);
    CHECK(contains(p.err, "payload:        29 bytes\n"));

    // The same record named by its namespace, scope and key.
    const auto by_flags =
        w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--tenant", "acme", "--key", "paid-0", "--payload"});
    CHECK(by_flags.exit_code == 0);
    CHECK(by_flags.out == payload);
}

TEST_CASE("inspect shows an expired record as expired, with how long ago") {
    workspace w;
    w.migrate();
    seed(w.db, "old", 1, record_kind::completed, sys::now() - 3h, 1h);      // expired 2h ago
    seed(w.db, "stale", 1, record_kind::in_flight, sys::now() - 2h, 1min);  // 1h 59m ago
    auto r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(key_of("old", 0))});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "state:          expired (was completed)\n"));
    CHECK(contains(r.out, "expired:        2h 0m ago\n"));
    r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(key_of("old", 0)), "--payload"});
    CHECK(r.out == payload_of("old", 0));

    r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(key_of("stale", 0))});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "state:          expired (was in flight)\n"));
    CHECK(contains(r.out, "expired:        1h 59m ago\n"));
}

TEST_CASE("inspect shows times beyond 2262 and before 1677 as such, never as an overflowed date") {
    workspace w;
    w.migrate();
    seed(w.db, "far", 2, record_kind::in_flight, sys::now(), 10min);
    {
        soci::session s;
        idem::open_sqlite_session(s, w.db);
        const auto row = [](int n) {
            return " WHERE key_hash = X'" + idem::test::record_id_hex(key_of("far", n)) + "'";
        };
        s << "UPDATE idem_records SET expires_at = 11000000000000" + row(0);  // 2318
        s << "UPDATE idem_records SET expires_at = -9223372036854775807 - 1, updated_at = -9223372036854775807 - 1" +
                 row(1);
    }
    auto r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(key_of("far", 0))});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "state:          in flight\n"));
    CHECK(contains(r.out, "lease until:    after 2262-04-11T23:47:16.854Z\n"));
    CHECK(contains(r.out, "lease left:     "));
    r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(key_of("far", 1))});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "state:          expired (was in flight)\n"));
    CHECK(contains(r.out, "created:        before 1677-09-21T00:12:43.145Z\n"));
    CHECK(contains(r.out, "expired:        "));
}

TEST_CASE("inspect: an unknown record exits 3 with a clear message") {
    workspace w;
    w.migrate();
    const auto k = key_of("never", 0);
    auto r = w.idem({"inspect", "--db", w.db, "--key-hash", digest_hex(k)});
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "no record or operation with key hash " + k.key_hash()));
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--tenant", "acme", "--key", "never-0"});
    CHECK(r.exit_code == 3);
}

TEST_CASE("inspect: bad key hashes and half-named records are usage errors") {
    workspace w;
    w.migrate();
    seed(w.db, "here", 1, record_kind::completed, sys::now(), 1h);
    const auto k = key_of("here", 0);

    // The 16-character form logs print cannot find a row: say so, suggest the flags.
    auto r = w.idem({"inspect", "--db", w.db, "--key-hash", k.key_hash()});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "16-character"));
    CHECK(contains(r.err, "--namespace"));

    const std::string full = digest_hex(k);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--key-hash", full.substr(0, 63)},
             {"--key-hash", full.substr(0, 31)},
             {"--key-hash", full.substr(0, 33)},
             {"--key-hash", full + "0"},
             {"--key-hash", full.substr(0, 63) + "g"},
             {"--key-hash", std::string(64, ' ')},
             {"--key-hash", ""},
             {},  // nothing names the record
             {"--key-hash", full, "--namespace", "cli", "--key", "here-0", "--tenant", "acme"},  // both
             {"--namespace", "cli", "--tenant", "acme"},                                         // no --key
             {"--key", "here-0", "--tenant", "acme"},                                            // no --namespace
             {"--namespace", "cli", "--key", "here-0"},                                          // no scope
             {"--key-hash", full, "--global"},  // a scope flag with the digest
             {"--tenant", "acme"},              // a scope flag alone
         }) {
        std::vector<std::string> all{"inspect", "--db", w.db};
        all.insert(all.end(), args.begin(), args.end());
        r = w.idem(all);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
    }
    CHECK(w.rows() == 1);
}

TEST_CASE("a database in a directory that does not exist: the error names the directory and is not transient") {
    workspace w;
    const auto directory = w.dir.path() / "no-such-dir";
    const auto db = (directory / "x.db").string();
    try {
        idem::sqlite_store store{{.path = db}};
        FAIL("the store opened in a missing directory");
    } catch (const idem::store_error& e) {
        CHECK(!e.is_transient());
        CHECK(e.failure() == idem::store_failure::other);
        CHECK(contains(e.what(), "the directory " + directory.string() + " does not exist"));
    }
    const auto r = w.idem({"migrate", "--db", db});
    CAPTURE(r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "the directory " + directory.string() + " does not exist"));
    CHECK(contains(r.err, "check --db"));
    CHECK(!std::filesystem::exists(directory));
}

TEST_CASE("purge, purge --dry-run and inspect on a database without the schema name `idem migrate --db`") {
    workspace w;
    {
        soci::session s;
        idem::open_sqlite_session(s, w.db);
    }
    for (const auto& args : std::vector<std::vector<std::string>>{
             on("purge", w.db), {"purge", "--db", w.db, "--dry-run"}, on("inspect", w.db)}) {
        const auto r = w.idem(args);
        CAPTURE(r.err);
        CHECK(r.exit_code == 1);
        CHECK(r.out.empty());
        CHECK(r.err == "idem: " + w.db +
                           " has no idem schema, or an older one: create or upgrade it with `idem migrate "
                           "--db " +
                           w.db + "`, then run this command again\n");
    }
    CHECK(w.idem({"migrate", "--db", w.db}).exit_code == 0);
    CHECK(w.idem({"purge", "--db", w.db, "--dry-run"}).out == "would purge 0 rows expired\n");
}

TEST_CASE("a missing SQLite file: purge and inspect say how to create it") {
    workspace w;
    for (const char* command : {"purge", "inspect"}) {
        const auto r = w.idem(on(command, w.db));
        CHECK(r.exit_code == 1);
        CHECK(r.err == "idem: no SQLite database at " + w.db + ": check --db, or create it with `idem migrate --db " +
                           w.db + "`\n");
    }
}

TEST_CASE("forget deletes a completed record and says what it deleted; its key then runs anew") {
    workspace w;
    w.migrate();
    seed(w.db, "paid", 2, record_kind::completed, sys::now(), 1h);
    const auto k = key_of("paid", 0);
    auto r = w.idem({"forget", "--db", w.db, "--namespace", "cli", "--tenant", "acme", "--key", "paid-0"});
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(contains(r.out, "deleted the record with key hash " + k.key_hash() + " (digest " + digest_hex(k) +
                              "): namespace cli, completed, written "));
    CHECK(!contains(r.out, "paid-0"));  // named by its hashes only
    CHECK(!contains(r.out, "acme"));
    CHECK(w.rows(named("paid", 1)) == 0);
    CHECK(w.rows() == 1);  // the other record stays
    {
        idem::sqlite_store store{{.path = w.db, .migrate_on_open = false}};
        CHECK(store.try_reserve(k, "fp", 1min).status == idem::reservation_status::reserved);
    }

    // By the SQL key_hash, as a table shows it; then it is gone: exit 3, nothing deleted.
    const auto other = key_of("paid", 1);
    r = w.idem({"forget", "--db", w.db, "--key-hash", idem::test::record_id_hex(other)});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "deleted the record with key hash " + other.key_hash() + " (SQL key_hash " +
                              idem::test::record_id_hex(other) + ")"));
    r = w.idem({"forget", "--db", w.db, "--key-hash", digest_hex(other)});
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "no record with key hash " + other.key_hash()));
    CHECK(contains(r.err, "nothing was deleted"));
    CHECK(w.rows() == 1);
}

TEST_CASE("forget keeps a record in flight (exit 4) unless --force; an expired one goes without") {
    workspace w;
    w.migrate();
    seed(w.db, "busy", 1, record_kind::in_flight, sys::now(), 10min);
    seed(w.db, "stale", 1, record_kind::in_flight, sys::now() - 2h, 1min);
    const auto busy = key_of("busy", 0);
    auto r = w.idem({"forget", "--db", w.db, "--key-hash", digest_hex(busy)});
    CAPTURE(r.err);
    CHECK(r.exit_code == 4);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "is in flight (lease left 9m "));
    CHECK(contains(r.err, "Nothing was deleted"));
    CHECK(contains(r.err, "--force"));
    CHECK(w.rows(named("busy", 1)) == 1);

    r = w.idem({"forget", "--db", w.db, "--key-hash", idem::test::record_id_hex(busy), "--force"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "key hash " + busy.key_hash()));
    CHECK(contains(r.out, ": namespace cli, in flight, written "));
    CHECK(contains(r.out, " (--force)\n"));
    CHECK(w.rows(named("busy", 1)) == 0);

    r = w.idem({"forget", "--db", w.db, "--namespace", "cli", "--tenant", "acme", "--key", "stale-0"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, ": namespace cli, expired (was in flight), written "));
    CHECK(!contains(r.out, "--force"));
    CHECK(w.rows() == 0);
}

TEST_CASE("forget: bad key hashes, half-named records and a missing database change nothing") {
    workspace w;
    w.migrate();
    seed(w.db, "here", 1, record_kind::completed, sys::now(), 1h);
    const auto k = key_of("here", 0);
    const std::string full = digest_hex(k);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--key-hash", k.key_hash()},  // the 16 characters logs print
             {"--key-hash", full.substr(0, 63)},
             {"--key-hash", full.substr(0, 31)},
             {"--key-hash", full + "0"},
             {"--key-hash", full.substr(0, 63) + "g"},
             {"--key-hash", ""},
             {},
             {"--force"},
             {"--key-hash", full, "--namespace", "cli", "--key", "here-0", "--tenant", "acme"},
             {"--namespace", "cli", "--tenant", "acme"},
             {"--namespace", "cli", "--key", "here-0"},
             {"--namespace", "cli", "--tenant", "acme", "--user", "u", "--key", "here-0"},
             {"--key-hash", full, "--global"},
             {"--key-hash", full, "--force", "extra"},
         }) {
        std::vector<std::string> all{"forget", "--db", w.db};
        all.insert(all.end(), args.begin(), args.end());
        const auto r = w.idem(all);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
    }
    CHECK(w.rows() == 1);

    const auto missing = (w.dir.path() / "missing.db").string();
    const auto r = w.idem({"forget", "--db", missing, "--key-hash", full});
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "no SQLite database"));
    CHECK(!std::filesystem::exists(missing));
    CHECK(w.idem({"forget", "--db", "xyz://x", "--key-hash", full}).exit_code == 2);
    CHECK(w.rows() == 1);
}

TEST_CASE("inspect --recent lists a namespace's records written last, newest first, never a key") {
    workspace w;
    w.migrate();
    seed(w.db, "old", 1, record_kind::completed, sys::now() - 3h, 1h);  // expired 2h ago
    seed(w.db, "mid", 1, record_kind::in_flight, sys::now() - 2min, 10min);
    seed(w.db, "new", 1, record_kind::completed, sys::now() - 1min, 1h);
    {
        idem::sqlite_store store{{.path = w.db, .migrate_on_open = false}};
        REQUIRE(store.try_reserve(idem::record_key("elsewhere", "x"), "fp", 1min).status ==
                idem::reservation_status::reserved);
    }
    const auto line_of = [](const std::string& prefix) {
        const auto k = key_of(prefix, 0);
        const auto padded = [](std::string text, std::size_t width) { return text.append(width - text.size(), ' '); };
        return padded(k.key_hash(), 18) + padded(idem::test::record_id_hex(k), 34);
    };
    auto r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--recent", "2"});
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<std::string> lines;
    for (std::size_t at = 0, end; (end = r.out.find('\n', at)) != std::string::npos; at = end + 1)
        lines.push_back(r.out.substr(at, end - at));
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].starts_with("key hash          SQL key_hash                      state"));
    CHECK(lines[1].starts_with(line_of("new") + "completed"));
    CHECK(lines[1].ends_with(std::to_string(payload_of("new", 0).size()) + " bytes"));
    CHECK(lines[2].starts_with(line_of("mid") + "in flight"));
    CHECK(lines[2].ends_with("-"));
    CHECK(!contains(r.out, "new-0"));
    CHECK(!contains(r.out, "acme"));

    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--recent", "1000"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, line_of("old") + "expired (was completed)"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 4);

    r = w.idem({"inspect", "--db", w.db, "--namespace", "nothing-here", "--recent", "5"});
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "no record in namespace nothing-here"));

    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--namespace", "cli", "--recent", "0"},
             {"--namespace", "cli", "--recent", "1001"},
             {"--namespace", "cli", "--recent", "-1"},
             {"--namespace", "cli", "--recent", "many"},
             {"--recent", "5"},
             {"--namespace", "cli", "--recent", "5", "--tenant", "acme"},
             {"--namespace", "cli", "--recent", "5", "--key", "new-0"},
             {"--namespace", "cli", "--recent", "5", "--payload"},
             {"--key-hash", digest_hex(key_of("new", 0)), "--recent", "5"},
         }) {
        std::vector<std::string> all{"inspect", "--db", w.db};
        all.insert(all.end(), args.begin(), args.end());
        r = w.idem(all);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
    }
}

namespace {

// `t` as `inspect` prints it and --since takes it: 2024-11-29T22:02:21.492Z.
std::string utc_text(sys::time_point t) {
    const auto ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    std::tm parts{};
    REQUIRE(gmtime_r(&seconds, &parts) != nullptr);
    char text[40];
    REQUIRE(std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &parts) > 0);
    return std::string(text) + "." + std::to_string(1000 + ms % 1000).substr(1) + "Z";
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    for (std::size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
        lines.push_back(text.substr(at, end - at));
    return lines;
}

}  // namespace

TEST_CASE("inspect --since lists what a namespace completed since a time, newest first, through the expiry index") {
    workspace w;
    w.migrate();
    const auto now = sys::now();
    seed(w.db, "old", 1, record_kind::completed, now - 3h, 1h);          // completed 3h ago, expired 2h ago
    seed(w.db, "day", 1, record_kind::completed, now - 90min, 24h);      // live, but completed before the hour
    seed(w.db, "short", 1, record_kind::completed, now - 20min, 10min);  // in the hour, expired since
    seed(w.db, "mid", 1, record_kind::in_flight, now - 10min, 1h);       // in the hour, never completed
    seed(w.db, "new", 3, record_kind::completed, now - 5min, 1h);
    {
        idem::sqlite_store store{{.path = w.db, .migrate_on_open = false}};
        const idem::record_key elsewhere("elsewhere", "x");
        const auto r = store.try_reserve(elsewhere, "fp", 1min);
        REQUIRE(store.complete(elsewhere, r.token, "fp", "p", 1h));
    }
    const std::int64_t rows = w.rows();
    const auto hash_of = [](const std::string& prefix, int n) { return idem::test::record_id_hex(key_of(prefix, n)); };

    auto r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", "1h"});
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 5);  // a header, new-0..2, short-0
    CHECK(lines[0].starts_with("key hash          SQL key_hash                      state"));
    for (int i = 1; i <= 3; ++i) {
        CHECK(contains(lines[static_cast<std::size_t>(i)], "  completed  "));
        CHECK(lines[static_cast<std::size_t>(i)].ends_with(std::to_string(payload_of("new", 0).size()) + " bytes"));
    }
    CHECK(contains(lines[4], hash_of("short", 0) + "  expired (was completed)"));
    for (int n = 0; n < 3; ++n) CHECK(contains(r.out, hash_of("new", n)));
    for (const char* absent : {"old", "day", "mid"}) CHECK(!contains(r.out, hash_of(absent, 0)));
    CHECK(!contains(r.out, "acme"));
    CHECK(!contains(r.out, "new-0"));

    // --limit keeps the newest; an absolute time (UTC, or with an offset) reaches further back.
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", "1h", "--limit", "2"});
    CHECK(r.exit_code == 0);
    lines = lines_of(r.out);
    REQUIRE(lines.size() == 3);
    CHECK(!contains(r.out, hash_of("short", 0)));
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", utc_text(now - 2h)});
    CHECK(r.exit_code == 0);
    CHECK(lines_of(r.out).size() == 6);
    CHECK(contains(lines_of(r.out)[5], hash_of("day", 0)));
    std::string shifted = utc_text(now - 1h);  // now - 2h as a clock at +01:00 shows it
    shifted.back() = '+';
    shifted += "01:00";
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", shifted});
    CAPTURE(shifted);
    CHECK(r.exit_code == 0);
    CHECK(lines_of(r.out).size() == 6);
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", "4h", "--limit", "1000"});
    CHECK(lines_of(r.out).size() == 7);  // old-0 too: expired, but completed since
    CHECK(contains(r.out, hash_of("old", 0) + "  expired (was completed)"));

    // One scope's records: the seeded ones are all tenant acme's; another tenant has none.
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", "1h", "--tenant", "acme"});
    CHECK(r.exit_code == 0);
    CHECK(lines_of(r.out).size() == 5);
    for (int n = 0; n < 3; ++n) CHECK(contains(r.out, hash_of("new", n)));
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", "1h", "--tenant", "acme2"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.err, "no record of namespace cli and scope "));
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", "1h", "--user", "acme"});
    CHECK(r.exit_code == 3);

    // Nothing completed since then, or an unknown namespace: exit 3, said on stderr.
    r = w.idem({"inspect", "--db", w.db, "--namespace", "cli", "--since", "1m"});
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "no record of namespace cli completed since "));
    r = w.idem({"inspect", "--db", w.db, "--namespace", "nothing-here", "--since", "7d"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.err, "no record of namespace nothing-here completed since"));

    // Bad input is a usage error that says why, and changes nothing.
    for (const auto& [args, why] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"--namespace", "cli", "--since", "yesterday"}, "a time is a UTC time"},
             {{"--namespace", "cli", "--since", "2024-02-30T00:00:00Z"}, "no such date"},
             {{"--namespace", "cli", "--since", "2024-11-29T22:02:21"}, "Z for UTC"},
             {{"--namespace", "cli", "--since", "2024-11-29T25:02:21Z"}, "no such time of day"},
             {{"--namespace", "cli", "--since", "1969-12-31T00:00:00Z"}, "from 1970"},
             {{"--namespace", "cli", "--since", "1h", "--tenant", "acme", "--user", "u"}, "exactly one of"},
             {{"--namespace", "cli", "--recent", "5", "--tenant", "acme"}, "lists a namespace, not a scope"},
             {{"--namespace", "cli", "--since", "1h", "--limit", "0"}, "--limit takes 1 to 1000"},
             {{"--namespace", "cli", "--since", "1h", "--limit", "1001"}, "--limit takes 1 to 1000"},
             {{"--namespace", "cli", "--limit", "5"}, "--limit goes with --since"},
             {{"--namespace", "cli", "--recent", "5", "--limit", "5"}, "--limit goes with --since"},
             {{"--namespace", "cli", "--since", "1h", "--recent", "5"}, "two listings"},
             {{"--namespace", "cli", "--since", "1h", "--key", "new-0"}, "nothing that names one record"},
             {{"--namespace", "cli", "--since", "1h", "--payload"}, "nothing that names one record"},
             {{"--since", "1h"}, "give --namespace NS"},
             {{"--namespace", "", "--since", "1h"}, "give --namespace NS"},
         }) {
        std::vector<std::string> all{"inspect", "--db", w.db};
        all.insert(all.end(), args.begin(), args.end());
        r = w.idem(all);
        CAPTURE(args);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        CHECK(contains(r.err, why));
    }
    CHECK(w.rows() == rows);
}
