// Stored results sealed at rest, on a real SQLite file and a throwaway
// PostgreSQL: a marker in a result is nowhere in the file (nor its WAL) or the
// record table with encryption on, and is there with it off (so the check can
// fail); replays are byte-identical; a ring in rotation opens what older keys
// sealed; a missing or wrong key is payload_unreadable and never a rerun; a
// reseal under load moves every result to the newest key.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "bank_places.hpp"
#include "idem/database.hpp"
#include "idem/encryption.hpp"
#include "idem/reseal.hpp"
#include "idem/steps.hpp"

namespace {

using namespace idem::test;

const std::string marker = "card=4111111111111111;token=sk_live_MARKER";

std::shared_ptr<const idem::encryption_keys> ring(std::vector<idem::encryption_key> keys) {
    return std::make_shared<const idem::encryption_keys>(std::move(keys));
}

std::string fmt_hex(unsigned char c) {
    constexpr char digits[] = "0123456789abcdef";
    return {digits[c >> 4], digits[c & 15]};
}

const idem::encryption_key k1{.id = "k1", .bytes = std::string(32, '\x11')};
const idem::encryption_key k2{.id = "k2", .bytes = std::string(32, '\x22')};

// Whether the marker is anywhere the database keeps bytes: the SQLite file
// and its WAL, or PostgreSQL's record table.
bool marker_stored(idem::database& db, const place& where) {
    if (where.postgresql())
        return count_rows(db, "SELECT COUNT(*) FROM idem_records WHERE position(convert_to('" + marker +
                                  "', 'UTF8') in payload) > 0") > 0;
    const std::string path = where.url().substr(std::string("sqlite:").size());
    for (const std::string& file : {path, path + "-wal"}) {
        std::ifstream in(file, std::ios::binary);
        const std::string bytes{std::istreambuf_iterator<char>(in), {}};
        if (bytes.find(marker) != std::string::npos) return true;
    }
    return false;
}

// A transfer whose result carries the marker; counts its runs.
struct charging {
    int runs = 0;
    idem::execution<std::string> operator()(idem::database& db, const std::string& key) {
        return db.once(key_of(key), "fp", [&](idem::unit_of_work& uow) {
            ++runs;
            move(uow, 5);
            return "charged " + key + " " + marker;
        });
    }
};

}  // namespace

TEST_CASE(
    "encryption at rest: a result's marker is absent from the SQLite file and the PostgreSQL table; replays "
    "are byte-identical; without keys it is there") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        for (const bool encrypted : {false, true}) {
            CAPTURE(encrypted);
            const auto place_of_run = std::make_unique<sqlite_place>();
            const place& here = where->postgresql() ? *where : *place_of_run;
            idem::database_options options;
            if (encrypted) options.executor.encryption = ring({k1});
            idem::database db = open_bank(here, options);
            charging charge;
            const auto first = charge(db, "t-1");
            CHECK(first.status() == idem::execution_status::executed);
            const auto again = charge(db, "t-1");
            CHECK(again.status() == idem::execution_status::replayed);
            CHECK(again.value() == first.value());
            CHECK(again.value() == "charged t-1 " + marker);
            CHECK(charge.runs == 1);
            CHECK(marker_stored(db, here) == !encrypted);
            if (where->postgresql()) {
                // Reset for the next round on the shared scratch database.
                db.transact([](idem::unit_of_work& uow) {
                    uow.sql() << "DELETE FROM idem_records";
                    uow.sql() << "DROP TABLE accounts";
                    uow.sql() << "DROP TABLE transfers";
                });
            }
        }
    }
}

TEST_CASE(
    "encryption at rest: keys rotate (the newest seals, every key opens); a missing or wrong key is "
    "payload_unreadable, never a rerun; records stored before encryption replay as they were") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        charging charge;
        std::string plain_result, k1_result;
        {
            idem::database db = open_bank(*where);
            plain_result = charge(db, "before").value();
        }
        {
            idem::database db = idem::database::open(where->url(), {.executor = {.encryption = ring({k1})}});
            k1_result = charge(db, "sealed-k1").value();
            CHECK(charge(db, "before").value() == plain_result);  // stored in the clear, replays as it was
        }
        {
            idem::database db = idem::database::open(where->url(), {.executor = {.encryption = ring({k2, k1})}});
            CHECK(charge(db, "sealed-k1").value() == k1_result);
            CHECK(charge(db, "sealed-k2").status() == idem::execution_status::executed);
            CHECK(charge(db, "sealed-k2").value() == "charged sealed-k2 " + marker);
        }
        CHECK(charge.runs == 3);
        const long long alice = [&] {
            idem::database db = idem::database::open(where->url());
            return balance(db, "alice");
        }();
        auto unreadable = [&](idem::database& db, const std::string& key) {
            try {
                (void)charge(db, key);
            } catch (const idem::payload_unreadable& e) {
                return e.why();
            }
            FAIL("the record opened");
            return idem::payload_unreadable::reason::malformed;
        };
        {
            // k1 dropped too early: what it sealed cannot be opened, and does not run again.
            idem::database db = idem::database::open(where->url(), {.executor = {.encryption = ring({k2})}});
            CHECK(unreadable(db, "sealed-k1") == idem::payload_unreadable::reason::unknown_key);
            CHECK(charge(db, "sealed-k2").status() == idem::execution_status::replayed);
        }
        {
            // Another key under the id k2: not authentic.
            idem::database db = idem::database::open(
                where->url(), {.executor = {.encryption = ring({{.id = "k2", .bytes = std::string(32, 'x')}})}});
            CHECK(unreadable(db, "sealed-k2") == idem::payload_unreadable::reason::not_authentic);
        }
        {
            // No keys at all: a sealed record is still not run again.
            idem::database db = idem::database::open(where->url());
            CHECK(unreadable(db, "sealed-k2") == idem::payload_unreadable::reason::unknown_key);
        }
        CHECK(charge.runs == 3);
        idem::database db = idem::database::open(where->url());
        CHECK(balance(db, "alice") == alice);
    }
}

namespace {

// A transfer whose result carries the marker, from several threads at once.
struct shared_charging {
    std::atomic<int> runs{0};
    idem::execution<std::string> operator()(idem::database& db, const std::string& key) {
        return db.once(key_of(key), "fp", [&](idem::unit_of_work& uow) {
            ++runs;
            move(uow, 5);
            return "charged " + key + " " + marker;
        });
    }
};

// The key id every completed record of the bank is sealed under ("" when one is not sealed).
std::set<std::string> sealed_under(idem::database& db) {
    std::set<std::string> ids;
    for (const idem::listed_record& l : db.admin().recent("bank.transfer", idem::max_recent_records)) {
        if (!l.state.completed) continue;
        const auto r = db.admin().inspect(l.key_hash, true);
        REQUIRE(r.has_value());
        ids.insert(idem::encryption_keys::sealed_with(r->payload.value()));
    }
    return ids;
}

}  // namespace

TEST_CASE(
    "encryption at rest: idem::reseal under load seals every result under the newest key while replays stay "
    "byte-identical and nothing runs twice; the old key can then leave the ring") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        shared_charging charge;
        std::map<std::string, std::string> answered;  // old key -> its first answer
        {
            idem::database db = open_bank(*where);
            for (int i = 0; i < 10; ++i)
                answered["plain-" + std::to_string(i)] = charge(db, "plain-" + std::to_string(i)).value();
        }
        {
            idem::database db = idem::database::open(where->url(), {.executor = {.encryption = ring({k1})}});
            for (int i = 0; i < 120; ++i)
                answered["old-" + std::to_string(i)] = charge(db, "old-" + std::to_string(i)).value();
            CHECK(sealed_under(db) == std::set<std::string>{"", "k1"});
        }
        const int runs_before = charge.runs.load();
        CHECK(runs_before == 130);

        // The services have the new ring; the reseal runs beside them.
        const auto rotated = ring({k2, k1});
        {
            idem::database db =
                idem::database::open(where->url(), {.pool_size = 4, .executor = {.encryption = rotated}});
            std::atomic<bool> resealed{false};
            std::atomic<int> replays{0}, mismatches{0}, failures{0}, fresh{0};
            auto client = [&](int id) {
                int round = 0;
                // Past the reseal's end by one full pass, so that every old key is replayed after it too.
                for (bool last_pass = false; !last_pass;) {
                    last_pass = resealed.load();
                    for (const auto& [key, first] : answered) {
                        try {
                            const auto e = charge(db, key);
                            if (e.status() != idem::execution_status::replayed || e.value() != first) ++mismatches;
                            ++replays;
                            if (++round % 8 == 0) {
                                (void)charge(db, "new-" + std::to_string(id) + "-" + std::to_string(round));
                                ++fresh;
                            }
                        } catch (const std::exception& e) {
                            MESSAGE(e.what());
                            ++failures;
                        }
                    }
                }
            };
            idem::reseal_result r;
            {
                std::thread a(client, 1), b(client, 2);
                try {
                    while (replays.load() < 40) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    r = idem::reseal(db.admin(), *rotated, {.batch = 16});
                } catch (const std::exception& e) {
                    FAIL_CHECK("the reseal failed: " << std::string(e.what()));
                }
                resealed = true;
                a.join();
                b.join();
            }
            CHECK(r.resealed == 130);  // the plain ones and k1's; the new ones were sealed under k2 already
            CHECK(r.read >= 130);
            CHECK(r.batches >= 9);
            CHECK(failures.load() == 0);
            CHECK(mismatches.load() == 0);
            CHECK(replays.load() >= 2 * 130);
            CHECK(sealed_under(db) == std::set<std::string>{"k2"});
            CHECK(idem::reseal(db.admin(), *rotated).resealed == 0);  // a second run rewrites nothing
            CHECK(charge.runs.load() == runs_before + fresh.load());

            // k1 leaves the ring: everything still replays, byte for byte, and nothing ran again.
            idem::database k2_only = idem::database::open(where->url(), {.executor = {.encryption = ring({k2})}});
            for (const auto& [key, first] : answered) {
                const auto e = charge(k2_only, key);
                CHECK(e.status() == idem::execution_status::replayed);
                CHECK(e.value() == first);
            }
            CHECK(charge.runs.load() == runs_before + fresh.load());
        }
        // Closed: on SQLite the WAL, which held the old pages' images, is checkpointed and gone.
        idem::database closed_and_opened = idem::database::open(where->url());
        CHECK(!marker_stored(closed_and_opened, *where));
    }
}

TEST_CASE(
    "encryption at rest: a reseal with a ring that lacks a key stops with payload_unreadable naming the record, "
    "and leaves its batch as it was") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        charging charge;
        std::string k1_result;
        {
            idem::database db = open_bank(*where, {.executor = {.encryption = ring({k1})}});
            k1_result = charge(db, "sealed-k1").value();
            (void)charge(db, "sealed-k1-too");
        }
        idem::database db = idem::database::open(where->url());
        try {
            (void)idem::reseal(db.admin(), *ring({k2}));
            FAIL("the reseal went through");
        } catch (const idem::payload_unreadable& e) {
            CHECK(e.why() == idem::payload_unreadable::reason::unknown_key);
            CHECK(std::string(e.what()).find("key hash ") != std::string::npos);
            CHECK(std::string(e.what()).find("\"k1\"") != std::string::npos);
        }
        CHECK(sealed_under(db) == std::set<std::string>{"k1"});
        CHECK_THROWS_AS((void)idem::reseal(db.admin(), *ring({k2}), {.batch = 0}), std::invalid_argument);
        idem::database with_k1 = idem::database::open(where->url(), {.executor = {.encryption = ring({k1})}});
        CHECK(charge(with_k1, "sealed-k1").value() == k1_result);
        CHECK(charge.runs == 2);
    }
}

TEST_CASE(
    "encryption at rest: an operation in steps seals its steps' results, its calls' answers and its final result; "
    "a run that takes over reads them back, and without keys nothing runs again") {
    std::string marker_hex;
    for (const char c : marker) marker_hex += fmt_hex(static_cast<unsigned char>(c));
    for (const bool encrypted : {false, true}) {
        CAPTURE(encrypted);
        for (const auto& where : places()) {
            CAPTURE(where->url());
            idem::database_options options;
            if (encrypted) options.executor.encryption = ring({k1});
            idem::database db = open_bank(*where, options);
            int steps_run = 0, calls = 0;
            bool fail_once = true;
            auto run = [&](idem::database& on) {
                return on.steps(key_of("op-1"), "fp", [&](idem::steps& op) {
                    const std::string held = op.step("hold", [&](idem::unit_of_work& uow) {
                        ++steps_run;
                        move(uow, 5);
                        return "held " + marker;
                    });
                    const std::string charged = op.call("charge", [&](const std::string&) {
                        ++calls;
                        return "charged " + marker;
                    });
                    if (std::exchange(fail_once, false)) throw std::runtime_error("the process died here");
                    return held + "|" + charged;
                });
            };
            CHECK_THROWS_AS((void)run(db), std::runtime_error);
            const auto taken_over = run(db);  // the lease ended with the throw: this run takes over
            CHECK(taken_over.status() == idem::execution_status::executed);
            CHECK(taken_over.value() == "held " + marker + "|charged " + marker);
            const auto replayed = run(db);
            CHECK(replayed.status() == idem::execution_status::replayed);
            CHECK(replayed.value() == taken_over.value());
            CHECK(steps_run == 1);
            CHECK(calls == 1);
            const long long holding =
                count_rows(db, "SELECT COUNT(*) FROM idem_steps WHERE result LIKE '%" + marker_hex + "%'") +
                count_rows(db, "SELECT COUNT(*) FROM idem_operations WHERE result LIKE '%" + marker_hex + "%'");
            CHECK(holding == (encrypted ? 0 : 3));
            if (encrypted) {
                idem::database without_keys = idem::database::open(where->url());
                CHECK_THROWS_AS((void)run(without_keys), idem::payload_unreadable);
                CHECK(steps_run == 1);
                CHECK(calls == 1);
            }
        }
    }
}
