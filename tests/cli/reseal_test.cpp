// `idem reseal` as a process on a real SQLite file: results stored in the
// clear, then under k1, are sealed again under the ring's first key; a second
// run rewrites nothing; a ring that lacks a key stops naming the record and
// changes nothing; a keys file that does not parse changes nothing.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "idem/encryption.hpp"
#include "idem/sqlite_store.hpp"

namespace {

using namespace std::chrono_literals;
using namespace idem::test::cli;

constexpr int records = 30;

std::string write_keys(const workspace& w, const std::string& name, const std::string& text) {
    const std::string path = (w.dir.path() / name).string();
    std::ofstream(path) << text;
    return path;
}

const std::string k1 = "k1:" + std::string(64, 'a') + "\n";
const std::string k2 = "k2:" + std::string(64, 'b') + "\n";
const std::string k3 = "k3:" + std::string(64, 'c') + "\n";

// The key ids the records are sealed under ("" for one in the clear), and
// whether each opens with `ring` to the payload it was written with.
std::set<std::string> sealed_under(const workspace& w, const idem::encryption_keys& ring) {
    idem::sqlite_store store({.path = w.db});
    std::set<std::string> ids;
    for (int n = 0; n < records; ++n) {
        const idem::record_key key = key_of("r", n);
        const auto r = store.inspect(key, true);
        REQUIRE(r.has_value());
        ids.insert(idem::encryption_keys::sealed_with(r->payload.value()));
        const std::string_view context{reinterpret_cast<const char*>(key.digest().data()), 16};
        CHECK(ring.open(r->payload.value(), context) == payload_of("r", n));
    }
    return ids;
}

}  // namespace

TEST_CASE("reseal: every result sealed under the newest key, in batches; a second run rewrites nothing") {
    workspace w;
    w.migrate();
    seed(w.db, "r", records, record_kind::completed, std::chrono::system_clock::now(), 1h);
    const auto all = idem::encryption_keys::parse(k2 + k1);

    auto r = w.idem({"reseal", "--db", w.db, "--keys", write_keys(w, "k1.keys", k1), "--batch", "7"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "resealed 30 of 30 completed records under the key \"k1\" in 5 batches, " +
                       r.out.substr(r.out.find(", ") + 2));
    CHECK(contains(r.out, "s; the rest were sealed under it already\n"));
    CHECK(sealed_under(w, all) == std::set<std::string>{"k1"});

    const std::string rotated = write_keys(w, "rotated.keys", "# newest first\n" + k2 + k1);
    r = w.idem({"reseal", "--db", w.db, "--keys", rotated});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "resealed 30 of 30 completed records under the key \"k2\" in 1 batch, "));
    CHECK(sealed_under(w, all) == std::set<std::string>{"k2"});

    r = w.idem({"reseal", "--db", w.db, "--keys", rotated});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "resealed 0 of 30 completed records"));
    CHECK(sealed_under(w, all) == std::set<std::string>{"k2"});
}

TEST_CASE("reseal: a ring without the key a record is sealed under stops with the record's key hash; nothing changes") {
    workspace w;
    w.migrate();
    seed(w.db, "r", records, record_kind::completed, std::chrono::system_clock::now(), 1h);
    REQUIRE(w.idem({"reseal", "--db", w.db, "--keys", write_keys(w, "k1.keys", k1)}).exit_code == 0);

    const auto r = w.idem({"reseal", "--db", w.db, "--keys", write_keys(w, "k3.keys", k3)});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "cannot be resealed"));
    CHECK(contains(r.err, "key hash "));
    CHECK(contains(r.err, "\"k1\""));
    CHECK(sealed_under(w, idem::encryption_keys::parse(k1)) == std::set<std::string>{"k1"});
}

TEST_CASE("reseal: a keys file that does not parse, a missing --keys, a zero batch: usage errors, nothing changes") {
    workspace w;
    w.migrate();
    seed(w.db, "r", records, record_kind::completed, std::chrono::system_clock::now(), 1h);
    const std::string secret = std::string(63, 'd') + "z";
    auto r = w.idem({"reseal", "--db", w.db, "--keys", write_keys(w, "bad.keys", "k1:" + secret + "\n")});
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "line 1: the key must be 64 hex digits"));
    CHECK(!contains(r.err, secret));  // never the line: it may be a key

    r = w.idem({"reseal", "--db", w.db, "--keys", (w.dir.path() / "absent.keys").string()});
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "cannot read"));

    CHECK(w.idem({"reseal", "--db", w.db}).exit_code == 2);
    CHECK(w.idem({"reseal", "--db", w.db, "--keys", write_keys(w, "k1.keys", k1), "--batch", "0"}).exit_code == 2);
    CHECK(sealed_under(w, idem::encryption_keys::parse(k1)) == std::set<std::string>{""});
}
