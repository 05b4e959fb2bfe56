// `idem inspect`, `idem complete` and `idem purge` on operations in steps, run
// as processes on a SQLite file that an idem::database in the test writes.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "cli_support.hpp"
#include "idem/completer.hpp"
#include "idem/database.hpp"
#include "idem/operation.hpp"
#if IDEM_CLI_POSTGRESQL
#include "postgres_server.hpp"
#endif
#if IDEM_TEST_MARIADB
#include "mariadb_server.hpp"
#endif

namespace {

using namespace std::chrono_literals;
using namespace idem::test::cli;

idem::record_key op_key(const std::string& k) {
    return {"shop.order", idem::scope::tenant("acme"), k};
}

std::vector<std::string> named(const std::string& k) {
    return {"--namespace", "shop.order", "--tenant", "acme", "--key", k};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

struct provider_timeout : std::runtime_error {
    provider_timeout() : std::runtime_error("the provider did not answer") {}
};

// An order in steps: reserve (a step), charge (a call that fails while `down`),
// ship (a step). Its compensation releases the reservation.
struct shop {
    idem::database db;
    bool down = false;
    int charges = 0;
    // Called inside the charge, before it answers.
    std::function<void()> while_charging = nullptr;
    idem::operation<std::string> order{
        "shop.order",
        [this](idem::steps& op) {
            op.step("reserve", [](idem::unit_of_work&) { return std::string("r1"); });
            const std::string charged = op.call("charge", [&](const std::string&) {
                ++charges;
                if (while_charging) while_charging();
                if (down) throw provider_timeout();
                return std::string("ch_1");
            });
            return op.step("ship", [&](idem::unit_of_work&) { return "shipped " + op.input() + " " + charged; });
        },
        {.compensate = [](idem::steps& op) {
            return op.step("release", [](idem::unit_of_work&) { return std::string("released"); });
        }}};

    explicit shop(const workspace& w) : shop("sqlite:" + w.db) {}
    explicit shop(const std::string& url) : db(idem::database::open(url)) { db.migrate(); }

    idem::execution<std::string> run(const std::string& k, const idem::execution_options& options = {}) {
        return order.run(db, op_key(k), "fp", "order " + k, options);
    }
};

}  // namespace

TEST_CASE("idem inspect shows an operation: its recovery point, each step's result and attempts") {
    workspace w;
    shop s(w);
    s.down = true;
    CHECK_THROWS_AS((void)s.run("o1"), provider_timeout);
    auto r = w.idem(with({"inspect", "--db", w.db}, named("o1")));
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "operation:      shop.order"));
    CHECK(contains(r.out, "state:          running (lease ended"));
    CHECK(contains(r.out, "recovery point: 1"));
    CHECK(contains(r.out, "fence:          1"));
    CHECK(contains(r.out, "input:          8 bytes"));
    CHECK(contains(r.out, "0   step  reserve             stored    1         \"r1\""));
    CHECK(contains(r.out, "1   call  charge              made      1         -"));
    CHECK_FALSE(contains(r.out, "payload:"));  // no record of db.once under the key

    s.down = false;
    REQUIRE(s.run("o1").status() == idem::execution_status::executed);
    r = w.idem(with({"inspect", "--db", w.db}, named("o1")));
    CHECK(contains(r.out, "state:          completed"));
    CHECK(contains(r.out, "recovery point: 3"));
    CHECK(contains(r.out, "fence:          2"));
    CHECK(contains(r.out, "result:         \"shipped order o1 ch_1\""));
    CHECK(contains(r.out, "1   call  charge              stored    2         \"ch_1\""));
    // By the SQL key_hash too, and --payload writes the final result alone to stdout.
    const std::string id = idem::test::record_id_hex(op_key("o1"));
    r = w.idem({"inspect", "--db", w.db, "--key-hash", id, "--payload"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "shipped order o1 ch_1");
    CHECK(contains(r.err, "recovery point: 3"));
}

TEST_CASE("idem complete lists unfinished operations, and exits 5 when one waits past --stuck-after") {
    workspace w;
    shop s(w);
    auto r = w.idem({"complete", "--db", w.db});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "0 unfinished operations, 0 with its lease ended\n");
    s.down = true;
    CHECK_THROWS_AS((void)s.run("late"), provider_timeout);
    std::this_thread::sleep_for(50ms);
    r = w.idem({"complete", "--db", w.db});
    CHECK(r.exit_code == 0);  // not yet for over 5 minutes
    CHECK(contains(r.out, idem::test::record_id_hex(op_key("late"))));
    CHECK(contains(r.out, "shop.order"));
    CHECK(contains(r.out, "running       ended "));
    CHECK(contains(r.out, "the provider did not answer") == false);  // only the completer's runs leave an error
    CHECK(contains(r.out, "1 unfinished operation, 1 with its lease ended (the longest"));
    r = w.idem({"complete", "--db", w.db, "--stuck-after", "0s"});
    CHECK(r.exit_code == 5);
    CHECK(contains(r.err, "1 operation waited over 0s for a completer"));
    // Another namespace lists none; a key without the rest is a usage error.
    CHECK(contains(w.idem({"complete", "--db", w.db, "--namespace", "other"}).out, "0 unfinished operations"));
    CHECK(w.idem({"complete", "--db", w.db, "--tenant", "acme"}).exit_code == 2);
    CHECK(w.idem({"complete", "--db", w.db, "--stuck-after", "soon"}).exit_code == 2);
}

TEST_CASE("idem complete --expire and --compensate hand a held operation to the completer at once") {
    workspace w;
    shop s(w);
    idem::completer completer(s.db, {s.order}, {.idle_wait = 5ms, .first_backoff = 0ms, .max_backoff = 0ms});

    // A run holds o1 (its lease ten minutes long) while the operator expires it: the
    // run's call returns to a fence that moved on, and the completer finishes it.
    idem::test::cli::outcome expired{};
    bool armed = true;  // the first charge only
    s.while_charging = [&] {
        if (std::exchange(armed, false)) expired = w.idem(with({"complete", "--db", w.db, "--expire"}, named("o1")));
    };
    // The call was made: its answer is what the moved fence refuses, and the message says so.
    const std::string refused = "idem: operation " + op_key("o1").key_hash() +
                                " was taken over by a newer run (fence 2, this run's 1): the answer of its call "
                                "'charge' was not stored";
    CHECK_THROWS_WITH_AS((void)s.run("o1", {.lease = 10min}), refused.c_str(), idem::lease_lost);
    CHECK(expired.exit_code == 0);
    CHECK(contains(expired.out, "released operation"));
    CHECK(idem::inspect_operation(s.db, op_key("o1"))->fence == 2);  // the first run's 1, moved on by --expire
    CHECK(completer.run_once() == 1);
    CHECK(idem::inspect_operation(s.db, op_key("o1"))->fence == 3);  // and the completer's takeover
    CHECK(s.run("o1").value() == "shipped order o1 ch_1");
    CHECK(s.charges == 2);

    // --compensate: the completer's next run undoes it instead.
    armed = true;
    s.while_charging = [&] {
        if (std::exchange(armed, false))
            expired = w.idem(with({"complete", "--db", w.db, "--compensate"}, named("o2")));
    };
    CHECK_THROWS_AS((void)s.run("o2", {.lease = 10min}), idem::lease_lost);
    CHECK(expired.exit_code == 0);
    CHECK(contains(expired.out, "marked to compensate"));
    CHECK(s.run("o2").status() == idem::execution_status::in_flight);  // the completer's now
    CHECK(completer.run_once() == 1);
    CHECK(s.run("o2").value() == "released");
    auto r = w.idem(with({"inspect", "--db", w.db}, named("o2")));
    CHECK(contains(r.out, "state:          compensated"));
    CHECK(contains(r.out, "compensates at: step 2"));
    CHECK(contains(r.out, "release             stored    1         \"released\"  (compensation)"));

    // Nothing unfinished under the key: exit 3, nothing changed.
    r = w.idem(with({"complete", "--db", w.db, "--expire"}, named("o2")));
    CHECK(r.exit_code == 3);
    CHECK(contains(r.err, "no unfinished operation"));
    CHECK(w.idem(with({"complete", "--db", w.db, "--expire", "--compensate"}, named("o2"))).exit_code == 2);

    // Begun with no compensation registered (database::steps): --compensate
    // refuses with exit 6 and changes nothing; --expire hands it over.
    CHECK_THROWS_AS((void)s.db.steps(op_key("plain"), "fp",
                                     [](idem::steps& op) {
                                         op.step("a", [](idem::unit_of_work&) { return std::string("a"); });
                                         throw provider_timeout();
                                         return std::string();
                                     }),
                    provider_timeout);
    const auto before = idem::inspect_operation(s.db, op_key("plain"));
    REQUIRE(before.has_value());
    r = w.idem(with({"complete", "--db", w.db, "--compensate"}, named("plain")));
    CHECK(r.exit_code == 6);
    CHECK(contains(r.err, "began with no compensation registered"));
    const auto after = idem::inspect_operation(s.db, op_key("plain"));
    REQUIRE(after.has_value());
    CHECK_FALSE(after->compensate_from.has_value());
    CHECK(after->fence == before->fence);
    CHECK(after->expires_at == before->expires_at);
    CHECK(w.idem(with({"complete", "--db", w.db, "--expire"}, named("plain"))).exit_code == 0);
    CHECK(idem::inspect_operation(s.db, op_key("plain"))->fence == before->fence + 1);
}

TEST_CASE("idem purge deletes finished operations past their retention, with their steps; never unfinished ones") {
    workspace w;
    shop s(w);
    for (int i = 0; i < 30; ++i)
        REQUIRE(s.run("old-" + std::to_string(i), {.lease = 50ms, .retention = 100ms}).status() ==
                idem::execution_status::executed);
    REQUIRE(s.run("kept").status() == idem::execution_status::executed);
    // And five records of db.once, expired too.
    for (int i = 0; i < 5; ++i)
        REQUIRE(s.db.once(op_key("record-" + std::to_string(i)), "fp", [](idem::unit_of_work&) { return 1; },
                          {.lease = 50ms, .retention = 100ms})
                    .status() == idem::execution_status::executed);
    s.down = true;
    CHECK_THROWS_AS((void)s.run("unfinished", {.lease = 50ms}), provider_timeout);
    std::this_thread::sleep_for(200ms);
    auto r = w.idem({"purge", "--db", w.db, "--dry-run"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "would purge 5 rows expired"));
    CHECK(contains(r.out, "would purge 30 expired operations"));
    // --max-rows bounds the records and the operations together.
    r = w.idem({"purge", "--db", w.db, "--batch", "7", "--max-rows", "12"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "purged 5 rows expired"));
    CHECK(contains(r.out, "purged 7 expired operations in 1 batch"));
    r = w.idem({"purge", "--db", w.db, "--batch", "7"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "purged 23 expired operations in 4 batches"));
    CHECK_FALSE(idem::inspect_operation(s.db, op_key("old-0")).has_value());
    CHECK(idem::inspect_operation(s.db, op_key("kept")).has_value());
    CHECK(idem::inspect_operation(s.db, op_key("unfinished"))->steps.size() == 2);
    CHECK(s.db.read([](soci::session& sql) {
        long long n = 0;
        sql << "SELECT COUNT(*) FROM idem_steps", soci::into(n);
        return n;
    }) == 5);
    CHECK_FALSE(contains(w.idem({"purge", "--db", w.db}).out, "operations"));
}

#if IDEM_CLI_POSTGRESQL || IDEM_TEST_MARIADB

namespace {

// inspect, complete --expire and --compensate, and purge of operations, on
// the database server `url` names (through the command's admin functions).
void operator_commands_on(const std::string& url) {
    workspace w;
    shop s(url);
    idem::completer completer(s.db, {s.order}, {.idle_wait = 5ms, .first_backoff = 0ms, .max_backoff = 0ms});
    s.down = true;
    CHECK_THROWS_AS((void)s.run("p1"), provider_timeout);
    auto r = w.idem(with({"inspect", "--db", url}, named("p1")));
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "recovery point: 1"));
    CHECK(contains(r.out, "1   call  charge              made      1         -"));
    r = w.idem({"complete", "--db", url, "--stuck-after", "0s"});
    CHECK(r.exit_code == 5);
    CHECK(contains(r.out, idem::test::record_id_hex(op_key("p1"))));
    // Marked to compensate: the completer undoes it on its next run.
    r = w.idem(with({"complete", "--db", url, "--compensate"}, named("p1")));
    CHECK(r.exit_code == 0);
    CHECK(s.run("p1").status() == idem::execution_status::in_flight);
    CHECK(completer.run_once() == 1);
    CHECK(s.run("p1").value() == "released");
    // Held by a run that outlives its lease: expired by hand, finished by the completer.
    s.down = false;
    bool armed = true;
    outcome expired{};
    s.while_charging = [&] {
        if (std::exchange(armed, false)) expired = w.idem(with({"complete", "--db", url, "--expire"}, named("p2")));
    };
    CHECK_THROWS_AS((void)s.run("p2", {.lease = 10min}), idem::lease_lost);
    CHECK(expired.exit_code == 0);
    CHECK(completer.run_once() == 1);
    CHECK(s.run("p2").value() == "shipped order p2 ch_1");
    CHECK(w.idem({"complete", "--db", url}).out == "0 unfinished operations, 0 with its lease ended\n");
    // Purged once their retention ended.
    REQUIRE(s.run("old", {.lease = 50ms, .retention = 100ms}).status() == idem::execution_status::executed);
    std::this_thread::sleep_for(200ms);
    r = w.idem({"purge", "--db", url});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "purged 1 expired operations in 1 batch"));
    CHECK_FALSE(idem::inspect_operation(s.db, op_key("old")).has_value());
    CHECK(idem::inspect_operation(s.db, op_key("p2")).has_value());
}

}  // namespace

#endif

#if IDEM_CLI_POSTGRESQL
TEST_CASE("on PostgreSQL: inspect, complete --expire and --compensate, and purge of operations") {
    const idem::test::scratch_database scratch(idem::test::shared_postgres(), "cli_complete");
    operator_commands_on(scratch.conninfo());
}
#endif

#if IDEM_TEST_MARIADB
TEST_CASE("on MariaDB: inspect, complete --expire and --compensate, and purge of operations") {
    const idem::test::mariadb_scratch_database scratch(idem::test::shared_mariadb(), "cli_complete");
    operator_commands_on(scratch.connection());
}
#endif
