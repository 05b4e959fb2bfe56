// The transactional outbox on real SQLite files and a throwaway PostgreSQL:
// uow.publish in the business transaction, and idem::outbox_relay delivering
// to a callback sink (retries, dead letters, order per key, leases, metrics).
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bank_places.hpp"
#include "idem/database.hpp"
#include "idem/outbox_relay.hpp"
#include "migration_files.hpp"
#include "recording_sink.hpp"
#include "sql/outbox_table.hpp"

#ifdef IDEM_TEST_POSTGRESQL
#include <libpq-fe.h>
#include <soci/postgresql/soci-postgresql.h>

#include <cstdio>
#endif

namespace {

using namespace std::chrono_literals;
using namespace idem::test;

// Bytes no text column would keep: NUL, invalid UTF-8, every byte value.
std::string awkward_bytes() {
    std::string s("\0nul\xff\xfe\xc0\x80 end", 12);
    for (int b = 0; b < 256; ++b) s += static_cast<char>(b);
    return s;
}

// Every message published and not deleted, as a table: a message waits in
// the outbox's intake until a relay's claim takes it in.
const std::string published =
    "(SELECT id, topic, ordering_key FROM idem_outbox UNION ALL SELECT id, topic, ordering_key FROM "
    "idem_outbox_intake) m";

long long outbox_rows(idem::database& db) {
    return count_rows(db, "SELECT COUNT(*) FROM " + published);
}

// Keeps what the sink was given; answers as `answer` says.
struct recorder {
    std::mutex mutex;
    std::vector<idem::outbox_delivery> seen;
    std::function<idem::delivery_result(const idem::outbox_delivery&)> answer = [](const idem::outbox_delivery&) {
        return idem::delivery_result::delivered();
    };

    std::shared_ptr<idem::callback_sink> sink() {
        return std::make_shared<idem::callback_sink>([this](const idem::outbox_delivery& m) {
            {
                std::lock_guard lock(mutex);
                seen.push_back(m);
            }
            return answer(m);
        });
    }
    std::vector<idem::outbox_delivery> all() {
        std::lock_guard lock(mutex);
        return seen;
    }
};

// Fast retries, for tests.
idem::outbox_relay_options quick(idem::outbox_relay_options o = {}) {
    o.first_backoff = 0ms;
    o.max_backoff = 0ms;
    o.idle_wait = 5ms;
    return o;
}

void drain(idem::outbox_relay& relay) {
    while (relay.run_once() > 0) {
    }
}

// From here on the database refuses a message whose topic is "poison".
void refuse_poison(idem::database& db, const place& where) {
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql()
            << (where.server()
                    ? "ALTER TABLE idem_outbox_intake ADD CONSTRAINT refuse_poison CHECK (topic <> 'poison')"
                    : "CREATE TRIGGER refuse_poison BEFORE INSERT ON idem_outbox_intake WHEN NEW.topic = 'poison' "
                      "BEGIN SELECT RAISE(ABORT, 'poison'); END");
    });
}

}  // namespace

TEST_CASE("publish: the row is written in the transaction; bytes survive the trip to the sink") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        const std::string payload = awkward_bytes();
        const std::vector<idem::message_header> headers = {{"content-type", "application/octet-stream"},
                                                           {std::string("x-\0bin", 6), "\xff\x00\x01"}};
        std::string id;
        const auto before = std::chrono::system_clock::now() - 1ms;
        db.transact([&](idem::unit_of_work& uow) {
            move(uow, 5);
            id = uow.publish(
                {.topic = "transfer.completed", .payload = payload, .ordering_key = "alice", .headers = headers});
            // Not yet written: held until the flush before COMMIT.
        });
        CHECK(id.size() == 36);
        CHECK(outbox_rows(db) == 1);
        const idem::outbox_metrics backlog = idem::outbox_backlog(db);
        CHECK(backlog.pending == 1);
        CHECK(backlog.lag <= std::chrono::system_clock::now() - before);
        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick());
        CHECK(relay.run_once() == 1);
        const auto seen = got.all();
        REQUIRE(seen.size() == 1);
        CHECK(seen[0].id == id);
        CHECK(seen[0].topic == "transfer.completed");
        CHECK(seen[0].ordering_key == std::optional<std::string>("alice"));
        CHECK(seen[0].payload == payload);
        CHECK(seen[0].headers == headers);
        CHECK(seen[0].attempt == 1);
        CHECK(seen[0].published_at >= before);  // when it was written, to the millisecond
        CHECK(seen[0].published_at <= std::chrono::system_clock::now());
        CHECK(relay.run_once() == 0);  // delivered once, not again
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE state = 1") == 1);
    }
}

TEST_CASE("publish: a message waits in the intake, one index at most, until a claim takes it in, in order") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        // SQLite: the rowid alone. PostgreSQL and MariaDB: the primary key on seq, appended to at its end.
        CHECK(count_rows(db, where->postgresql() ? "SELECT COUNT(*) FROM pg_indexes WHERE tablename = "
                                                   "'idem_outbox_intake' AND schemaname = current_schema() AND "
                                                   "indexdef LIKE '%USING btree (seq)'"
                             : where->mariadb()
                                 ? "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics WHERE "
                                   "table_schema = DATABASE() AND table_name = 'idem_outbox_intake' AND "
                                   "index_name = 'PRIMARY' AND column_name = 'seq'"
                                 : "SELECT COUNT(*) FROM sqlite_master WHERE tbl_name = "
                                   "'idem_outbox_intake' AND type = 'index'") == (where->server() ? 1 : 0));
        if (where->mariadb())
            CHECK(count_rows(db,
                             "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics WHERE "
                             "table_schema = DATABASE() AND table_name = 'idem_outbox_intake'") == 1);
        if (where->postgresql())
            CHECK(count_rows(db,
                             "SELECT COUNT(*) FROM pg_indexes WHERE tablename = 'idem_outbox_intake' AND "
                             "schemaname = current_schema()") == 1);
        const auto before = std::chrono::system_clock::now() - 1ms;
        for (const auto& [payload, key] : {std::pair{"m1", "a"}, {"m2", "b"}, {"m3", "a"}, {"m4", "c"}})
            db.transact([&](idem::unit_of_work& uow) {
                (void)uow.publish({.topic = "t", .payload = payload, .ordering_key = key});
            });
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox_intake") == 4);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox") == 0);
        const idem::outbox_metrics backlog = idem::outbox_backlog(db);
        CHECK(backlog.pending == 4);
        CHECK(backlog.lag >= std::chrono::system_clock::now() - before - 2s);
        CHECK(backlog.lag <= std::chrono::system_clock::now() - before);

        // A claim of one: all four come in, seq in the order they were published; m1 goes out.
        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick({.batch = 1}));
        CHECK(relay.run_once() == 1);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox_intake") == 0);
        const std::vector<std::string> in_order = db.read([&](soci::session& sql) {
            std::vector<std::string> payloads;
            soci::rowset<std::string> rows =
                (sql.prepare << (where->postgresql()
                                     ? "SELECT convert_from(payload, 'UTF8') FROM idem_outbox ORDER BY seq"
                                 : where->mariadb() ? "SELECT CAST(payload AS CHAR) FROM idem_outbox ORDER BY seq"
                                                    : "SELECT CAST(payload AS TEXT) FROM idem_outbox ORDER BY seq"));
            for (const std::string& p : rows) payloads.push_back(p);
            return payloads;
        });
        CHECK(in_order == std::vector<std::string>{"m1", "m2", "m3", "m4"});
        CHECK(idem::outbox_backlog(db).pending == 3);
        drain(relay);
        std::vector<std::string> seen;
        for (const auto& m : got.all()) seen.push_back(m.payload);
        REQUIRE(seen.size() == 4);
        CHECK(seen[0] == "m1");
        CHECK(std::find(seen.begin(), seen.end(), "m1") < std::find(seen.begin(), seen.end(), "m3"));
    }
}

TEST_CASE("relay: a batch of one claims one message; the dead letters listed one at a time") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([](idem::unit_of_work& uow) {
            for (const char* payload : {"1", "2", "3"}) (void)uow.publish("t", payload);
        });
        recorder got;
        got.answer = [](const idem::outbox_delivery& m) {
            return m.payload == "3" ? idem::delivery_result::refused("no") : idem::delivery_result::delivered();
        };
        idem::outbox_relay relay(db, got.sink(), quick({.batch = 1}));
        CHECK(relay.run_once() == 1);
        CHECK(idem::outbox_backlog(db).pending == 2);
        drain(relay);
        CHECK(got.all().size() == 3);
        const std::vector<idem::dead_letter> dead = idem::dead_letters(db, 1);
        REQUIRE(dead.size() == 1);
        CHECK(dead[0].last_answer.find("no") != std::string::npos);
    }
}

TEST_CASE("publish: a rolled-back transaction or savepoint leaves no message") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        CHECK_THROWS_AS(db.transact([&](idem::unit_of_work& uow) {
            (void)uow.publish("lost", "rolled back");
            uow.flush();  // written, then rolled back with the transaction
            throw std::runtime_error("business failure");
        }),
                        std::runtime_error);
        CHECK(outbox_rows(db) == 0);

        db.transact([&](idem::unit_of_work& uow) {
            (void)uow.publish("kept", "outer");
            try {
                uow.savepoint([&] {
                    (void)uow.publish("lost", "held back, dropped");
                    throw std::runtime_error("inner failure");
                });
            } catch (const std::runtime_error&) {
            }
            try {
                uow.savepoint([&] {
                    (void)uow.publish("lost", "written, rolled back to");
                    uow.flush();
                    throw std::runtime_error("inner failure");
                });
            } catch (const std::runtime_error&) {
            }
            uow.savepoint([&] { (void)uow.publish("kept", "released"); });
        });
        CHECK(outbox_rows(db) == 2);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM " + published + " WHERE topic = 'kept'") == 2);
    }
}

TEST_CASE(
    "publish in db.once: a replay publishes nothing; a key run again after its record was forgotten publishes new "
    "ids, and every message reaches the sink") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        std::vector<std::string> ids;
        auto work = [&](idem::unit_of_work& uow) {
            move(uow, 7);
            ids.push_back(uow.publish("transfer.completed", "first"));
            ids.push_back(uow.publish("ledger.posted", "second"));
            return std::string("moved");
        };
        const idem::record_key key = key_of("t-1");
        CHECK(db.once(key, "fp", work).status() == idem::execution_status::executed);
        CHECK(db.once(key, "fp", work).status() == idem::execution_status::replayed);
        REQUIRE(ids.size() == 2);
        CHECK(ids[0] != ids[1]);
        CHECK(outbox_rows(db) == 2);
        // The record gone (purged, forgotten), the same work runs again and
        // moves the money again: its messages are other ones, with new ids,
        // and the sink gets them too, while the first two wait (the first
        // time round, on SQLite still in the intake) and once they are
        // delivered (the second).
        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick());
        for (const bool delivered_first : {false, true}) {
            CAPTURE(delivered_first);
            CHECK(db.admin().forget(key.digest(), true).outcome == idem::forget_outcome::deleted);
            CHECK(db.once(key, "fp", work).status() == idem::execution_status::executed);
            drain(relay);
        }
        REQUIRE(ids.size() == 6);
        CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == 6);
        CHECK(outbox_rows(db) == 6);
        CHECK(got.all().size() == 6);
        CHECK(balance(db, "alice") == 1000000 - 3 * 7);
        CHECK(relay.metrics().duplicates == 0);
        CHECK(relay.metrics().conflicts == 0);
        // Another record: other ids. Outside a record: random ones.
        CHECK(db.once(key_of("t-2"), "fp", work).status() == idem::execution_status::executed);
        CHECK(ids[6] != ids[0]);
        const std::string a = db.transact([](idem::unit_of_work& uow) { return uow.publish("x", "1"); });
        const std::string b = db.transact([](idem::unit_of_work& uow) { return uow.publish("x", "1"); });
        CHECK(a != b);
        CHECK(outbox_rows(db) == 10);
    }
}

TEST_CASE(
    "publish in db.once: a call's reruns after a conflict publish the same ids, and only the committed run's "
    "messages are in the outbox") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        std::vector<std::string> ids;
        int runs = 0;
        const auto e = db.once(key_of("retried"), "fp", [&](idem::unit_of_work& uow) {
            move(uow, 1);
            ids.push_back(uow.publish("transfer.completed", "once"));
            // A transient conflict: the runner rolls back and runs the work again.
            if (++runs < 3) throw idem::store_error(idem::store_failure::conflict, "a made-up conflict");
            return std::string("moved");
        });
        CHECK(e.status() == idem::execution_status::executed);
        REQUIRE(runs == 3);
        CHECK(ids[0] == ids[1]);
        CHECK(ids[1] == ids[2]);
        CHECK(outbox_rows(db) == 1);
        CHECK(balance(db, "alice") == 1000000 - 1);
    }
}

TEST_CASE(
    "publish in db.once in Observe and Off: every duplicate runs and commits, and each run's messages have ids of "
    "their own: the sink gets every one") {
    for (const auto mode : {idem::mode::observe, idem::mode::off}) {
        for (const auto& where : places()) {
            CAPTURE(where->url());
            CAPTURE(idem::to_string(mode));
            idem::database db = open_bank(*where, {.executor = {.mode = mode}});
            std::set<std::string> ids;
            for (int i = 0; i < 3; ++i)
                CHECK(db.once(key_of("same"), "fp", [&](idem::unit_of_work& uow) {
                            move(uow, 10);
                            ids.insert(uow.publish(
                                {.topic = "transfer.completed", .payload = "alice -10", .ordering_key = "alice"}));
                            return std::string("moved");
                        }).status() == idem::execution_status::executed);
            CHECK(ids.size() == 3);
            CHECK(balance(db, "alice") == 1000000 - 30);
            recorder got;
            idem::outbox_relay relay(db, got.sink(), quick());
            drain(relay);
            // The money moved three times; a receiver that dedupes by id applies three events.
            std::set<std::string> delivered;
            for (const idem::outbox_delivery& m : got.all()) delivered.insert(m.id);
            CHECK(delivered == ids);
            CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE state = 2") == 0);
        }
    }
}

TEST_CASE(
    "an id that arrives again in the intake is never dropped silently: the same message is delivered once and "
    "counted, another message is dead-lettered under a new id, counted and logged, and delivered once requeued") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        auto logs = std::make_shared<recording_sink>();
        idem::database db = open_bank(*where);
        // A message published under `id`, as a process that derived ids
        // from the record alone would (two runs of one record's work).
        auto publish_as = [&](const std::string& id, const std::string& payload, const std::string& key) {
            db.transact([&](idem::unit_of_work& uow) {
                const std::string random = uow.publish({.topic = "t", .payload = payload, .ordering_key = key});
                uow.flush();
                uow.sql() << "UPDATE idem_outbox_intake SET id = :id WHERE id = :random", soci::use(id),
                    soci::use(random);
            });
        };
        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick({.telemetry = logs}));
        // Taken by a message in the outbox already, then twice within one batch of the intake.
        publish_as("id-1", "first", "k1");
        drain(relay);
        publish_as("id-1", "first", "k1");   // the same message again
        publish_as("id-1", "second", "k1");  // another one under its id
        publish_as("id-2", "alpha", "k2");   // free
        publish_as("id-2", "alpha", "k2");   // the same, in the same batch
        publish_as("id-2", "beta", "k2");    // another, in the same batch
        publish_as("id-3", "after", "k2");   // behind the conflict, in its key
        drain(relay);
        const idem::outbox_metrics m = relay.metrics();
        CHECK(m.duplicates == 2);
        CHECK(m.conflicts == 2);
        CHECK(m.dead == 2);
        // Nothing lost: the first of each id delivered, then the next of key k2 waits behind its dead letter.
        std::vector<std::string> delivered;
        for (const idem::outbox_delivery& d : got.all()) delivered.push_back(d.id + "=" + d.payload);
        CHECK(delivered == std::vector<std::string>{"id-1=first", "id-2=alpha"});
        const std::vector<idem::dead_letter> dead = idem::dead_letters(db);
        REQUIRE(dead.size() == 2);
        for (const idem::dead_letter& d : dead) {
            CHECK(d.id.size() == 36);
            CHECK(d.last_answer.find("had been published before for another message") != std::string::npos);
        }
        CHECK(dead[0].last_answer.find("id-1") != std::string::npos);
        CHECK(dead[1].last_answer.find("id-2") != std::string::npos);
        int conflict_logs = 0, duplicate_logs = 0;
        for (const recorded_log& l : logs->logs()) {
            conflict_logs += l.name == "idem.outbox.id_conflict" && l.level == idem::log_level::error ? 1 : 0;
            duplicate_logs += l.name == "idem.outbox.duplicate" ? 1 : 0;
        }
        CHECK(conflict_logs == 2);
        CHECK(duplicate_logs == 2);
        auto metrics = std::make_shared<idem::metrics_sink>();
        metrics->on_outbox(m);
        CHECK(metrics->render_prometheus().find("idem_outbox_id_conflicts_total 2") != std::string::npos);
        CHECK(metrics->render_prometheus().find("idem_outbox_duplicates_total 2") != std::string::npos);
        // An operator requeues them: delivered under their new ids, the key's order kept.
        CHECK(idem::requeue_dead_letters(db) == 2);
        drain(relay);
        delivered.clear();
        for (const idem::outbox_delivery& d : got.all()) delivered.push_back(d.payload);
        CHECK(delivered == std::vector<std::string>{"first", "alpha", "second", "beta", "after"});
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE state <> 1") == 0);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox_intake") == 0);
    }
}

TEST_CASE(
    "publish in db.once: 1 to 40 messages, in order; one the database refuses undoes the transfer and "
    "the record; a new server connection prepares again") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        // On PostgreSQL up to 16 messages travel with the record's statement and
        // COMMIT, more go out as published: both sides of that line.
        auto publish_n = [&](const std::string& k, int n, const std::string& last_topic) {
            return db.once(key_of(k), "fp", [&](idem::unit_of_work& uow) {
                move(uow, 1);
                for (int i = 0; i < n; ++i)
                    (void)uow.publish(
                        {.topic = i + 1 == n ? last_topic : k, .payload = std::to_string(i), .ordering_key = k});
                return std::string("moved");
            });
        };
        for (const int n : {1, 16, 17, 40}) {
            CAPTURE(n);
            const std::string k = "many-" + std::to_string(n);
            CHECK(publish_n(k, n, k).status() == idem::execution_status::executed);
            CHECK(count_rows(db, "SELECT COUNT(*) FROM " + published + " WHERE ordering_key = '" + k + "'") == n);
        }
        recorder sink;
        idem::outbox_relay relay(db, sink.sink(), quick());
        drain(relay);
        std::map<std::string, std::vector<std::string>> by_key;
        for (const idem::outbox_delivery& m : sink.all()) by_key[*m.ordering_key].push_back(m.payload);
        for (const int n : {1, 16, 17, 40}) {
            std::vector<std::string> expected;
            for (int i = 0; i < n; ++i) expected.push_back(std::to_string(i));
            CHECK(by_key["many-" + std::to_string(n)] == expected);
        }

        // The database refuses the last message: the transfer and the record go with it.
        refuse_poison(db, *where);
        const long long bob = balance(db, "bob");
        const long long rows = outbox_rows(db);
        for (const int n : {1, 17}) {
            CAPTURE(n);
            const std::string k = "refused-" + std::to_string(n);
            CHECK_THROWS_AS(publish_n(k, n, "poison"), idem::store_error);
            CHECK(balance(db, "bob") == bob);
            CHECK(outbox_rows(db) == rows);
            // Nothing was recorded: the key runs (not replays) once the message is one the database takes.
            CHECK(publish_n(k, n, k).status() == idem::execution_status::executed);
            CHECK(outbox_rows(db) == rows + n);
            CHECK(balance(db, "bob") == bob + 1);
            CHECK(publish_n(k, n, k).status() == idem::execution_status::replayed);
            db.transact([&](idem::unit_of_work& uow) {
                uow.sql() << "DELETE FROM idem_outbox WHERE ordering_key = '" + k + "'";
                uow.sql() << "DELETE FROM idem_outbox_intake WHERE ordering_key = '" + k + "'";
                uow.sql() << "UPDATE accounts SET balance = balance - 1 WHERE id = 'bob'";
            });
        }

#ifdef IDEM_TEST_POSTGRESQL
        if (where->postgresql()) {
            // Every server connection of the pool ends: the statement the
            // messages go out with is prepared again on the new ones.
            soci::session admin;
            idem::open_postgresql_session(admin, where->url());
            admin << "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
                     "current_database() AND pid <> pg_backend_pid()";
            int executed = 0;
            for (int attempt = 0; attempt < 5 && executed < 3; ++attempt) {
                try {
                    if (publish_n("after-" + std::to_string(executed), 2, "after").status() ==
                        idem::execution_status::executed)
                        ++executed;
                } catch (const idem::store_error& e) {
                    CHECK(e.is_connection_lost());  // the pool's old connections, and nothing else
                }
            }
            CHECK(executed == 3);
            CHECK(count_rows(db, "SELECT COUNT(*) FROM " + published + " WHERE topic = 'after'") == 3);
            CHECK(count_rows(db, "SELECT COUNT(*) FROM " + published + " WHERE ordering_key LIKE 'after-%'") == 6);
        }
#endif
    }
}

#ifdef IDEM_TEST_POSTGRESQL
TEST_CASE(
    "publish in db.once on PostgreSQL: up to 16 messages go with the record's statement and COMMIT, one round trip") {
    postgresql_place where;
    idem::database db = open_bank(where);
    for (const int n : {1, 16}) {
        CAPTURE(n);
        // libpq's trace of what the client sends from the first message on: a
        // pipeline ends with one Sync, so the Syncs are the round trips.
        std::FILE* trace = std::tmpfile();
        REQUIRE(trace != nullptr);
        PGconn* conn = nullptr;
        const auto e = db.once(key_of("traced-" + std::to_string(n)), "fp", [&](idem::unit_of_work& uow) {
            move(uow, 1);
            conn = static_cast<soci::postgresql_session_backend*>(uow.sql().get_backend())->conn_;
            PQtrace(conn, trace);
            PQsetTraceFlags(conn, PQTRACE_SUPPRESS_TIMESTAMPS);
            for (int i = 0; i < n; ++i) (void)uow.publish("traced", std::to_string(i));
            return std::string("moved");
        });
        PQuntrace(conn);
        CHECK(e.status() == idem::execution_status::executed);
        std::rewind(trace);
        int syncs = 0, executes = 0;
        char line[4096];
        while (std::fgets(line, sizeof line, trace) != nullptr) {
            const std::string text(line);
            if (!text.starts_with("F\t")) continue;
            if (text.find("\tSync") != std::string::npos) ++syncs;
            if (text.find("\tExecute") != std::string::npos) ++executes;
        }
        std::fclose(trace);
        CHECK(executes == n + 2);  // the messages, the record, COMMIT
        CHECK(syncs == 1);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox_intake WHERE topic = 'traced'") == n);
        db.transact(
            [](idem::unit_of_work& uow) { uow.sql() << "DELETE FROM idem_outbox_intake WHERE topic = 'traced'"; });
    }
}
#endif

TEST_CASE("publish: after a message the database refused, the next goes in as given, no key where it has none") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        // One pooled connection: every message below goes in through the same kept INSERT.
        idem::database db = open_bank(*where, {.pool_size = 1});
        refuse_poison(db, *where);
        long long prepared = -1;  // named statements on the connection after the first round
        for (int run = 0; run < 3; ++run) {
            CAPTURE(run);
            CHECK_THROWS_AS(db.transact([](idem::unit_of_work& uow) {
                (void)uow.publish({.topic = "poison", .payload = "p", .ordering_key = "stale"});
            }),
                            idem::store_error);
            (void)db.transact([](idem::unit_of_work& uow) { return uow.publish("plain", "x"); });
            if (where->postgresql()) {
                // A refusal leaves no statement behind on the server connection.
                const long long now = count_rows(db, "SELECT COUNT(*) FROM pg_prepared_statements");
                if (run == 0) prepared = now;
                CHECK(now == prepared);
            }
        }
        CHECK(outbox_rows(db) == 3);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM " + published + " WHERE topic = 'plain' AND ordering_key IS NULL") ==
              3);
    }
}

TEST_CASE("publish refuses bad messages with typed errors and writes nothing") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where, {.max_message_bytes = 1000});
        db.transact([&](idem::unit_of_work& uow) {
            CHECK_THROWS_AS((void)uow.publish("big", std::string(1001, 'x')), idem::message_too_large);
            try {
                (void)uow.publish(
                    {.topic = "big", .payload = std::string(900, 'x'), .headers = {{"h", std::string(101, 'y')}}});
                FAIL("a message over the limit was accepted");
            } catch (const idem::message_too_large& e) {
                CHECK(e.bytes() == 1002);
                CHECK(e.limit() == 1000);
                CHECK(e.category() == idem::error_category::data);
            }
            CHECK_THROWS_AS((void)uow.publish("", "x"), std::invalid_argument);
            CHECK_THROWS_AS((void)uow.publish(std::string(256, 't'), "x"), std::invalid_argument);
            CHECK_THROWS_AS((void)uow.publish("bad\xff", "x"), std::invalid_argument);
            CHECK_THROWS_AS((void)uow.publish(std::string("a\0b", 3), "x"), std::invalid_argument);
            CHECK_THROWS_AS((void)uow.publish({.topic = "t", .payload = "x", .ordering_key = ""}),
                            std::invalid_argument);
            // The business transaction decides: it goes on, with the message that fits.
            (void)uow.publish("fits", std::string(1000, 'x'));
        });
        CHECK(outbox_rows(db) == 1);
        CHECK_THROWS_AS(idem::database::open(where->url(), {.max_message_bytes = 0}), idem::options_error);
    }
}

TEST_CASE("relay: a failing sink is retried with a new attempt; max_attempts dead-letters, answer kept; requeue") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) {
            (void)uow.publish("flaky", "a");
            (void)uow.publish("refused", "b");
            (void)uow.publish("down", "c");
        });
        recorder got;
        got.answer = [](const idem::outbox_delivery& m) {
            if (m.topic == "refused") return idem::delivery_result::refused(std::string("422 no\xff\0", 8));
            if (m.topic == "down") throw std::runtime_error("connection refused");
            if (m.attempt < 2) return idem::delivery_result::retry("503 busy");
            return idem::delivery_result::delivered();
        };
        idem::outbox_relay relay(db, got.sink(), quick({.max_attempts = 3}));
        drain(relay);
        std::map<std::string, std::vector<int>> attempts;
        for (const auto& m : got.all()) attempts[m.topic].push_back(m.attempt);
        CHECK(attempts["flaky"] == std::vector<int>{1, 2});
        CHECK(attempts["refused"] == std::vector<int>{1});
        CHECK(attempts["down"] == std::vector<int>{1, 2, 3});
        const idem::outbox_metrics m = relay.metrics();
        CHECK(m.pending == 0);
        CHECK(m.dead == 2);
        CHECK(m.delivered == 1);
        CHECK(m.failed == 1 + 1 + 3);
        auto dead = idem::dead_letters(db);
        REQUIRE(dead.size() == 2);
        CHECK(dead[0].topic == "refused");
        CHECK(dead[0].attempts == 1);
        CHECK(dead[0].last_answer == "422 no??");  // kept as valid text
        CHECK(dead[1].topic == "down");
        CHECK(dead[1].attempts == 3);
        CHECK(dead[1].last_answer == "connection refused");

        got.answer = [](const idem::outbox_delivery&) { return idem::delivery_result::delivered(); };
        CHECK(idem::requeue_dead_letters(db, dead[1].id) == 1);
        CHECK(idem::requeue_dead_letters(db, dead[1].id) == 0);  // no longer dead
        CHECK(relay.run_once() == 1);
        CHECK(got.all().back().topic == "down");
        CHECK(got.all().back().attempt == 1);  // attempts start again
        CHECK(idem::requeue_dead_letters(db) == 1);
        drain(relay);
        CHECK(relay.metrics().dead == 0);
        CHECK(relay.metrics().pending == 0);
    }
}

TEST_CASE("relay: a later message of an ordering key waits for the earlier; other keys go on") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) {
            (void)uow.publish({.topic = "a1", .payload = "", .ordering_key = "alice"});
            (void)uow.publish({.topic = "a2", .payload = "", .ordering_key = "alice"});
            (void)uow.publish({.topic = "b1", .payload = "", .ordering_key = "bob"});
            (void)uow.publish({.topic = "n1", .payload = ""});
        });
        recorder got;
        bool a1_ok = false;
        got.answer = [&](const idem::outbox_delivery& m) {
            if (m.topic == "a1" && !a1_ok) return idem::delivery_result::retry("not yet");
            return idem::delivery_result::delivered();
        };
        idem::outbox_relay relay(db, got.sink(), quick());
        for (int i = 0; i < 4; ++i) (void)relay.run_once();  // a1 keeps failing: a2 must not go
        CHECK(relay.run_once() == 1);                        // a1 alone is due
        std::vector<std::string> topics;
        for (const auto& m : got.all()) topics.push_back(m.topic);
        CHECK(std::count(topics.begin(), topics.end(), "a2") == 0);
        CHECK(std::count(topics.begin(), topics.end(), "b1") == 1);
        CHECK(std::count(topics.begin(), topics.end(), "n1") == 1);
        a1_ok = true;
        drain(relay);
        topics.clear();
        for (const auto& m : got.all()) topics.push_back(m.topic);
        const auto a1 = std::find(topics.rbegin(), topics.rend(), "a1");
        const auto a2 = std::find(topics.rbegin(), topics.rend(), "a2");
        REQUIRE(a2 != topics.rend());
        CHECK(a2 < a1);  // a2 came after the last a1 (reverse iterators)
        CHECK(relay.metrics().pending == 0);
    }
}

TEST_CASE("relay: a key's long queue holds back no other key; what waits deep in it is set aside until its turn") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < 100; ++i)
                (void)uow.publish({.topic = "hot", .payload = std::to_string(i), .ordering_key = "hot"});
            for (int k = 0; k < 5; ++k)
                (void)uow.publish({.topic = "other", .payload = "", .ordering_key = "k" + std::to_string(k)});
        });
        recorder got;
        // A lease of an hour: a message set aside that its predecessor's delivery
        // did not make due again would wait that long.
        idem::outbox_relay relay(db, got.sink(), quick({.batch = 10, .lease = 1h}));
        CHECK(relay.run_once() == 6);  // hot 0 and the other keys, behind hot 1 to 99
        CHECK(relay.run_once() == 1);  // hot 1 only: what waits 64 or more deep, hot 65 to 99, is set aside
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE state = 0 AND claim IS NULL AND available_at > " +
                                 std::to_string(idem::detail::outbox_table::now_ms() + 600000)) == 35);
        drain(relay);
        const auto seen = got.all();
        REQUIRE(seen.size() == 105);
        int next_hot = 0;
        for (const auto& m : seen)
            if (m.topic == "hot") CHECK(std::stoi(m.payload) == next_hot++);
        CHECK(next_hot == 100);
        CHECK(relay.metrics().pending == 0);
    }
}

TEST_CASE("relay: messages behind a dead letter are set aside, so other keys go on, and follow it once re-queued") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) {
            for (int k = 0; k < 8; ++k) {
                const std::string key = "k" + std::to_string(k);
                (void)uow.publish({.topic = "poison", .payload = "", .ordering_key = key});
                for (int i = 0; i < 3; ++i)
                    (void)uow.publish({.topic = "after", .payload = std::to_string(i), .ordering_key = key});
            }
            for (int i = 0; i < 6; ++i) (void)uow.publish("other", std::to_string(i));
        });
        recorder got;
        bool refuse = true;
        got.answer = [&](const idem::outbox_delivery& m) {
            return m.topic == "poison" && refuse ? idem::delivery_result::refused("no")
                                                 : idem::delivery_result::delivered();
        };
        idem::outbox_relay relay(db, got.sink(), quick({.batch = 4, .lease = 1h}));
        drain(relay);
        auto topics = [&] {
            std::map<std::string, int> n;
            for (const auto& m : got.all()) ++n[m.topic];
            return n;
        };
        CHECK(topics()["poison"] == 8);
        CHECK(topics()["other"] == 6);
        CHECK(topics()["after"] == 0);
        CHECK(relay.metrics().dead == 8);
        // Behind dead letters, set aside: claims no longer read them.
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE state = 0 AND available_at > " +
                                 std::to_string(idem::detail::outbox_table::now_ms() + 600000)) == 24);

        refuse = false;
        CHECK(idem::requeue_dead_letters(db) == 8);
        drain(relay);
        CHECK(topics()["after"] == 24);
        std::map<std::string, int> next;
        for (const auto& m : got.all())
            if (m.topic == "after") CHECK(std::stoi(m.payload) == next[*m.ordering_key]++);
        CHECK(relay.metrics().pending == 0);
    }
}

TEST_CASE("relay: messages that came due before the one they wait for (its relay died) do not hide it") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < 6; ++i)
                for (int k = 0; k < 5; ++k)
                    (void)uow.publish(
                        {.topic = "t", .payload = std::to_string(i), .ordering_key = "k" + std::to_string(k)});
        });
        // A relay claims the first of each key and dies; its lease ended just after the others came due: in the
        // order messages come due, the 25 waiting ones come first.
        const std::int64_t now = idem::detail::outbox_table::now_ms();
        const auto claimed = db.transact([&](idem::unit_of_work& uow) {
            return idem::detail::outbox_table::claim(uow, 5, now, now + 3600000, "killed-relay");
        });
        REQUIRE(claimed.size() == 5);
        db.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "UPDATE idem_outbox SET available_at = created_at + 1 WHERE claim = 'killed-relay'";
        });
        while (idem::detail::outbox_table::now_ms() <= claimed[0].created_at + 1) std::this_thread::sleep_for(1ms);
        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick({.batch = 4, .lease = 1h}));
        drain(relay);
        const auto seen = got.all();
        CHECK(seen.size() == 30);
        std::map<std::string, int> next;
        for (const auto& m : seen) CHECK(std::stoi(m.payload) == next[*m.ordering_key]++);
        CHECK(relay.metrics().pending == 0);
    }
}

TEST_CASE("relay: a claim that is never settled (its relay died) comes due when its lease ends") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) { (void)uow.publish("t", "p"); });
        // What a relay killed after its claim leaves: the claim, never settled, with a lease of an hour.
        const std::int64_t now = idem::detail::outbox_table::now_ms(), hour = 3600000;
        const auto claimed = db.transact([&](idem::unit_of_work& uow) {
            return idem::detail::outbox_table::claim(uow, 10, now, now + hour, "killed-relay");
        });
        REQUIRE(claimed.size() == 1);
        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick());
        CHECK(relay.run_once() == 0);  // held by the lease
        // The hour passes: the lease's end is now behind.
        db.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "UPDATE idem_outbox SET available_at = available_at - " + std::to_string(hour);
        });
        CHECK(relay.run_once() == 1);
        REQUIRE(got.all().size() == 1);
        CHECK(got.all()[0].attempt == 2);
        // The dead relay's late settle touches nothing: the claim is no longer its.
        db.transact([&](idem::unit_of_work& uow) {
            const idem::detail::outbox_table::unsettled again{.id = claimed[0].id, .available_at = 0, .answer = "x"};
            idem::detail::outbox_table::settle(uow, "killed-relay", now + hour, {&again, 1}, now, false);
        });
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE state = 1") == 1);
    }
}

// A relay thread settles a batch in the transaction of its next claim; when
// stopped it settles the one it delivered last, so stop() leaves nothing
// delivered and still pending (delivered again when its lease ends).
TEST_CASE("relay: stop() settles the batch a thread delivered last") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < 25; ++i) (void)uow.publish("t", std::to_string(i));
        });
        std::promise<void> reached_last;
        std::atomic<idem::outbox_relay*> relay{nullptr};
        auto sink = std::make_shared<idem::callback_sink>([&](const idem::outbox_delivery& m) {
            if (m.payload == "24") {
                // The last message: answered once stop() has begun, so no round comes after this one.
                reached_last.set_value();
                while (relay.load()->running()) std::this_thread::sleep_for(1ms);
            }
            return idem::delivery_result::delivered();
        });
        idem::outbox_relay r(db, sink, quick({.batch = 10, .lease = 1h}));
        relay = &r;
        r.start();
        reached_last.get_future().wait();
        r.stop();
        CHECK(r.metrics().delivered == 25);
        CHECK(r.metrics().pending == 0);
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE state = 1") == 25);
    }
}

TEST_CASE("relay: 4 threads and a second relay share 600 messages, each delivered once, in order per key") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where, {.pool_size = 12});
        constexpr int keys = 5, per_key = 120;  // queues deep enough to be set aside
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < per_key; ++i)
                for (int k = 0; k < keys; ++k)
                    (void)uow.publish(
                        {.topic = "t", .payload = std::to_string(i), .ordering_key = "k" + std::to_string(k)});
        });
        recorder got;
        auto metrics = std::make_shared<idem::metrics_sink>();
        // Leases of an hour: no relay dies here, so a message set aside behind an earlier one that its
        // delivery did not make due again (a claim and a settle crossing) would still wait at the deadline.
        idem::outbox_relay first(
            db, got.sink(), quick({.batch = 16, .threads = 4, .lease = 1h, .report_every = 1ms, .telemetry = metrics}));
        idem::outbox_relay second(db, got.sink(), quick({.batch = 16, .threads = 1, .lease = 1h}));
        first.start();
        second.start();
        CHECK(first.running());
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (got.all().size() < static_cast<std::size_t>(keys * per_key) &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(10ms);
        std::this_thread::sleep_for(50ms);  // a duplicate would show up meanwhile
        first.stop();
        second.stop();
        CHECK_FALSE(first.running());
        const auto seen = got.all();
        CHECK(seen.size() == static_cast<std::size_t>(keys * per_key));
        std::set<std::string> ids;
        std::map<std::string, int> next;
        bool in_order = true;
        for (const auto& m : seen) {
            ids.insert(m.id);
            if (std::stoi(m.payload) != next[*m.ordering_key]++) in_order = false;
        }
        CHECK(ids.size() == seen.size());
        CHECK(in_order);
        CHECK(first.metrics().pending == 0);
        CHECK(metrics->render_prometheus().find("idem_outbox_pending") != std::string::npos);
    }
}

TEST_CASE("purge_delivered_messages deletes delivered messages in batches, never pending ones") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        idem::database db = open_bank(*where);
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < 25; ++i) (void)uow.publish("t", std::to_string(i));
        });
        recorder got;
        got.answer = [](const idem::outbox_delivery& m) {
            return m.payload == "0" ? idem::delivery_result::retry("later", 1h) : idem::delivery_result::delivered();
        };
        idem::outbox_relay relay(db, got.sink(), quick());
        drain(relay);
        CHECK(idem::purge_delivered_messages(db, {.older_than = 1h}).deleted == 0);  // delivered just now
        const idem::purge_result r = idem::purge_delivered_messages(db, {.batch = 10, .rest_between_batches = false});
        CHECK(r.deleted == 24);
        CHECK(r.batches == 3);
        CHECK(outbox_rows(db) == 1);
        CHECK(relay.metrics().pending == 1);
    }
}

// A batch's DELETE takes the ids its subquery locked once (FOR UPDATE SKIP
// LOCKED): a subquery run again per row, or per rescan, would lock other rows
// each time and delete more than the batch.
TEST_CASE("purge_delivered_messages on PostgreSQL: no batch deletes more than its size; rows another holds stay") {
    for (const auto& where : places()) {
        idem::database db = open_bank(*where);
        if (db.engine() != "postgresql") continue;
        db.transact([&](idem::unit_of_work& uow) {
            for (int i = 0; i < 30; ++i) (void)uow.publish("t", std::to_string(i));
        });
        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick());
        drain(relay);
        std::promise<void> locked, release;
        std::thread holder([&] {
            db.transact([&](idem::unit_of_work& uow) {
                std::vector<std::string> ids(5);
                uow.sql() << "SELECT id FROM idem_outbox ORDER BY done_at, seq LIMIT 5 FOR UPDATE", soci::into(ids);
                locked.set_value();
                release.get_future().wait();
            });
        });
        locked.get_future().wait();
        std::vector<std::size_t> batches;
        std::size_t before = 0;
        const idem::purge_result r = idem::purge_delivered_messages(
            db, {.batch = 10, .rest_between_batches = false, .progress = [&](const idem::purge_progress& p) {
                     batches.push_back(p.deleted - before);
                     before = p.deleted;
                 }});
        release.set_value();
        holder.join();
        CHECK(r.deleted == 25);
        CHECK(batches == std::vector<std::size_t>{10, 10, 5});
        CHECK(outbox_rows(db) == 5);
    }
}

namespace {

// Every outbox row as text, in seq order: what a migration must keep as it was.
std::vector<std::string> outbox_dump(idem::database& db) {
    return db.read([](soci::session& sql) {
        std::vector<std::string> rows;
        soci::rowset<std::string> all =
            (sql.prepare << "SELECT CAST(seq AS TEXT) || '|' || id || '|' || topic || '|' || COALESCE(ordering_key, "
                            "'-') || '|' || CAST(headers AS TEXT) || '|' || CAST(payload AS TEXT) || '|' || "
                            "CAST(state AS TEXT) || '|' || CAST(attempts AS TEXT) || '|' || CAST(created_at AS TEXT) "
                            "|| '|' || CAST(available_at AS TEXT) || '|' || COALESCE(CAST(done_at AS TEXT), '-') || "
                            "'|' || COALESCE(claim, '-') || '|' || COALESCE(last_answer, '-') FROM idem_outbox "
                            "ORDER BY seq");
        for (const std::string& row : all) rows.push_back(row);
        return rows;
    });
}

// The outbox's indexes, each with its definition, by name.
std::vector<std::string> outbox_indexes(idem::database& db) {
    const bool sqlite = db.engine() == "sqlite";
    return db.read([&](soci::session& sql) {
        std::vector<std::string> indexes;
        soci::rowset<std::string> all =
            (sql.prepare << (sqlite ? "SELECT name || ': ' || COALESCE(sql, '') FROM sqlite_master WHERE type = "
                                      "'index' AND tbl_name = 'idem_outbox' ORDER BY name"
                                    : "SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE tablename = "
                                      "'idem_outbox' AND schemaname = current_schema() ORDER BY indexname"));
        for (const std::string& index : all) indexes.push_back(index);
        return indexes;
    });
}

// The outbox table's definition on SQLite, without its comments and with one space for each run of blanks.
std::string sqlite_outbox_table(idem::database& db) {
    const std::string text = db.read([](soci::session& sql) {
        std::string definition;
        sql << "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'idem_outbox'", soci::into(definition);
        return definition;
    });
    std::string plain;
    for (std::size_t at = 0; at < text.size(); ++at) {
        if (text.compare(at, 2, "--") == 0)
            at = std::min(text.find('\n', at), text.size()) - 1;
        else if (!std::isspace(static_cast<unsigned char>(text[at])))
            plain += text[at];
        else if (!plain.empty() && plain.back() != ' ')
            plain += ' ';
    }
    return plain;
}

long long seq_of(idem::database& db, const std::string& id) {
    return count_rows(db, "SELECT seq FROM idem_outbox WHERE id = '" + id + "'");
}

idem::database at_version(const idem::test::place& where, const std::vector<idem::test::migration_file>& files,
                          int version) {
    idem::database db = idem::database::open(where.url());
    db.transact([&](idem::unit_of_work& uow) { idem::test::migrate_through(uow.sql(), files, version); });
    return db;
}

// From each schema an earlier version left with an outbox, messages in every
// state (delivered, claimed by a relay that died, claimed by one still at it,
// dead, pending, with and without a key) through the migration that makes
// the outbox lean (`Place`: a fresh database of one kind).
template <class Place>
void lean_outbox_from_every_earlier_schema(const std::string& dialect) {
    const auto files = idem::test::migration_files(IDEM_SOURCE_ROOT "/migrations/" + dialect);
    const int outbox = idem::test::version_named(files, "_outbox");
    const int lean = idem::test::version_named(files, "_outbox_lean");
    REQUIRE(outbox > 0);
    REQUIRE(lean > outbox);
    // The indexes after it: those of the schema just before, less the pending rows' by seq.
    std::vector<std::string> lean_indexes;
    std::string table_before_lean;
    {
        Place where;
        idem::database db = at_version(where, files, lean - 1);
        for (const std::string& index : outbox_indexes(db))
            if (!index.starts_with("idem_outbox_pending:")) lean_indexes.push_back(index);
        REQUIRE(lean_indexes.size() == 5);  // the id's (primary key or unique), dead, delivered, due, ordering
        if (dialect == "sqlite") table_before_lean = sqlite_outbox_table(db);
    }

    for (int version = outbox; version < lean; ++version) {
        CAPTURE(version);
        Place where;
        idem::database db = at_version(where, files, version);
        // Each message's payload is its name, its ordering key the name's letter (x and n have none).
        std::map<std::string, std::string> id;
        const auto publish = [&](const std::vector<std::string>& names) {
            db.transact([&](idem::unit_of_work& uow) {
                for (const std::string& name : names) {
                    const bool keyed = name[0] != 'x' && name[0] != 'n';
                    id[name] = uow.publish({.topic = "t",
                                            .payload = name,
                                            .ordering_key = keyed ? std::optional(name.substr(0, 1)) : std::nullopt,
                                            .headers = {{"h", name}}});
                }
            });
        };
        const std::int64_t now = idem::detail::outbox_table::now_ms(), hour = 3'600'000;
        // Published as the versions of that schema published them: into idem_outbox.
        db.transact([&](idem::unit_of_work& uow) {
            for (const std::string name : {"a1", "x1", "a2", "c1", "b1", "a3", "c2", "n1", "b2"}) {
                const bool keyed = name[0] != 'x' && name[0] != 'n';
                id[name] = "id-" + name;
                const std::string key = keyed ? name.substr(0, 1) : std::string();
                soci::indicator key_null = keyed ? soci::i_ok : soci::i_null;
                const std::string headers = "1:h" + std::to_string(name.size()) + ":" + name;
                const long long at = now;
                uow.sql() << "INSERT INTO idem_outbox (id, topic, ordering_key, headers, payload, created_at, "
                             "available_at) VALUES (:id, 't', :key, :headers, :payload, :created, :available)",
                    soci::use(id[name]), soci::use(key, key_null), soci::use(headers), soci::use(name), soci::use(at),
                    soci::use(at);
            }
        });
        const auto set = [&](const std::string& name, const std::string& assignments) {
            db.transact([&](idem::unit_of_work& uow) {
                uow.sql() << "UPDATE idem_outbox SET " + assignments + " WHERE id = '" + id[name] + "'";
            });
        };
        const std::string t = std::to_string(now);
        set("a1", "state = 1, attempts = 1, done_at = " + t);
        set("x1", "state = 1, attempts = 1, done_at = " + t);
        // Its relay died: the lease ended a minute ago.
        set("a2", "attempts = 1, claim = 'gone', available_at = " + std::to_string(now - 60'000) +
                      ", created_at = " + std::to_string(now - 2 * hour));
        set("c1", "state = 2, attempts = 10, done_at = " + t + ", last_answer = 'refused'");
        // Another relay holds it for an hour yet.
        set("b1", "attempts = 1, claim = 'elsewhere', available_at = " + std::to_string(now + hour) +
                      ", created_at = " + std::to_string(now - hour));
        // Older by the clock than a2, later in publication order.
        set("n1", "created_at = " + std::to_string(now - 3 * hour));

        const std::vector<std::string> before = outbox_dump(db);
        REQUIRE(before.size() == 9);
        std::vector<std::string> expected;
        for (const auto& f : files)
            if (f.version > version) expected.push_back(f.name);
        CHECK(db.migrate() == expected);
        CHECK(outbox_dump(db) == before);  // every row, with its seq
        CHECK(outbox_indexes(db) == lean_indexes);
        if (dialect == "sqlite") {
            std::string table = table_before_lean;
            table.replace(table.find(" AUTOINCREMENT"), 14, "");
            table.replace(table.find("idem_outbox"), 11, "\"idem_outbox\"");  // as ALTER TABLE RENAME writes it
            CHECK(sqlite_outbox_table(db) == table);
            CHECK(count_rows(db, "SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'idem_outbox'") == 0);
        }

        // The lag: the oldest pending message in publication order (a2), not the oldest by the clock (n1).
        const std::int64_t asked = idem::detail::outbox_table::now_ms();
        idem::outbox_metrics backlog = idem::outbox_backlog(db);
        const std::int64_t answered = idem::detail::outbox_table::now_ms();
        CHECK(backlog.pending == 6);
        CHECK(backlog.dead == 1);
        CHECK(backlog.lag.count() >= asked - (now - 2 * hour));
        CHECK(backlog.lag.count() <= answered - (now - 2 * hour));

        recorder got;
        idem::outbox_relay relay(db, got.sink(), quick());
        drain(relay);
        std::vector<std::string> seen;
        for (const auto& m : got.all()) seen.push_back(m.payload);
        // b2 waits behind b1, c2 behind c1.
        REQUIRE(seen.size() == 3);
        CHECK(std::is_permutation(seen.begin(), seen.end(), std::vector<std::string>{"a2", "a3", "n1"}.begin()));
        CHECK(std::find(seen.begin(), seen.end(), "a2") < std::find(seen.begin(), seen.end(), "a3"));
        backlog = idem::outbox_backlog(db);
        CHECK(backlog.pending == 3);
        CHECK(backlog.lag.count() >= hour);  // b1's
        CHECK(backlog.lag.count() < 2 * hour);

        // A message published after the purge deleted the highest seq still
        // comes after every message that waits.
        publish({"a4"});
        drain(relay);
        const long long a4_seq = seq_of(db, id["a4"]);
        CHECK(idem::purge_delivered_messages(db, {.rest_between_batches = false}).deleted == 6);
        publish({"b3"});
        drain(relay);  // b3 waits behind b1 (SQLite: in the outbox now, not its intake)
        CHECK(count_rows(db, "SELECT COUNT(*) FROM idem_outbox WHERE seq >= " + std::to_string(seq_of(db, id["b3"]))) ==
              1);
        if (dialect == "sqlite") CHECK(seq_of(db, id["b3"]) == a4_seq);  // a4's, used again
        set("b1", "available_at = " + std::to_string(now - 1));          // that relay died too
        CHECK(idem::requeue_dead_letters(db) == 1);
        drain(relay);
        seen.clear();
        for (const auto& m : got.all()) seen.push_back(m.payload);
        CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == seen.size());  // each once
        CHECK(seen.size() == 9);
        for (const std::vector<std::string>& key :
             {std::vector<std::string>{"a2", "a3", "a4"}, {"b1", "b2", "b3"}, {"c1", "c2"}, {"n1"}}) {
            CAPTURE(key.front());
            std::vector<std::string> delivered;
            std::copy_if(seen.begin(), seen.end(), std::back_inserter(delivered),
                         [&](const std::string& m) { return m[0] == key.front()[0]; });
            CHECK(delivered == key);
        }
        backlog = idem::outbox_backlog(db);
        CHECK(backlog.pending == 0);
        CHECK(backlog.dead == 0);
        CHECK(backlog.lag.count() == 0);
    }
}

}  // namespace

TEST_CASE("outbox: from every earlier schema, messages in every state keep their rows, seq and order; lean indexes") {
    lean_outbox_from_every_earlier_schema<sqlite_place>("sqlite");
#ifdef IDEM_TEST_POSTGRESQL
    lean_outbox_from_every_earlier_schema<postgresql_place>("postgresql");
#endif
}
