// The three-step payment the tests of idem::database::steps run, in the test
// process and in steps_worker: hold the amount (a step), charge it at a
// provider stand-in (a call), settle (a step). Every step writes a row to
// `effects`, so a test counts how often each ran; the provider stand-in keeps
// every request it received and applies one charge per call key, as a
// provider that honours idempotency keys does.
#pragma once

#include <soci/soci.h>

#include <functional>
#include <string>

#include "idem/database.hpp"

namespace idem::test::steps_bank {

inline void create_tables(idem::database& db) {
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS effects (op TEXT NOT NULL, step TEXT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS provider_requests (call_key TEXT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS provider_charges (call_key TEXT PRIMARY KEY, amount BIGINT NOT NULL)";
    });
}

inline void effect(idem::unit_of_work& uow, const std::string& op, const std::string& step) {
    uow.sql() << "INSERT INTO effects (op, step) VALUES (:op, :step)", soci::use(op), soci::use(step);
}

// The provider stand-in: records the request, applies the charge once per call key.
inline std::string charge(idem::database& db, const std::string& call_key, long long amount) {
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << "INSERT INTO provider_requests (call_key) VALUES (:k)", soci::use(call_key);
        uow.sql()
            << "INSERT INTO provider_charges (call_key, amount) VALUES (:k, :a) ON CONFLICT (call_key) DO NOTHING",
            soci::use(call_key), soci::use(amount);
    });
    return "ch_" + call_key.substr(call_key.size() - 8);
}

// Where a worker stops to be killed: "hold" after the hold committed, "charge"
// inside the call after the provider applied it, "charged" after the call's
// answer is stored; the hook is called with each name in turn.
using crash_hook = std::function<void(const std::string& point)>;

inline idem::record_key key_of(const std::string& k) {
    return {"bank.payment", idem::scope::tenant("acme"), k};
}

// alice pays bob `amount` in three steps; returns "hold/charge id/settled".
inline idem::execution<std::string> pay(idem::database& db, const std::string& op, long long amount,
                                        const crash_hook& at = {}, const idem::execution_options& options = {}) {
    auto point = [&](const std::string& name) {
        if (at) at(name);
    };
    return db.steps(
        key_of(op), "pay:" + std::to_string(amount),
        [&](idem::steps& s) {
            std::string hold = s.step("hold", [&](idem::unit_of_work& uow) {
                effect(uow, op, "hold");
                uow.sql() << "UPDATE accounts SET balance = balance - :a WHERE id = 'alice'", soci::use(amount);
                return std::string("held");
            });
            point("hold");
            std::string charged = s.call("charge", [&](const std::string& call_key) {
                std::string id = charge(db, call_key, amount);
                point("charge");
                return id;
            });
            point("charged");
            return s.step("settle", [&](idem::unit_of_work& uow) {
                effect(uow, op, "settle");
                uow.sql() << "UPDATE accounts SET balance = balance + :a WHERE id = 'bob'", soci::use(amount);
                return hold + "/" + charged + "/settled";
            });
        },
        options);
}

}  // namespace idem::test::steps_bank
