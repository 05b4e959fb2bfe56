// Stored results sealed at rest, on a real SQLite file and a throwaway
// PostgreSQL: a marker in a result is nowhere in the file (nor its WAL) or the
// record table with encryption on, and is there with it off (so the check can
// fail); replays are byte-identical; a ring in rotation opens what older keys
// sealed; a missing or wrong key is payload_unreadable and never a rerun.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "bank_places.hpp"
#include "idem/database.hpp"
#include "idem/encryption.hpp"

namespace {

using namespace idem::test;

const std::string marker = "card=4111111111111111;token=sk_live_MARKER";

std::shared_ptr<const idem::encryption_keys> ring(std::vector<idem::encryption_key> keys) {
    return std::make_shared<const idem::encryption_keys>(std::move(keys));
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
