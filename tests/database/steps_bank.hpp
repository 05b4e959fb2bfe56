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
#include "idem/operation.hpp"

namespace idem::test::steps_bank {

inline void create_tables(idem::database& db) {
    db.transact([](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS effects (op TEXT NOT NULL, step TEXT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS provider_requests (call_key TEXT NOT NULL)";
        uow.sql() << "CREATE TABLE IF NOT EXISTS provider_charges (call_key VARCHAR(255) PRIMARY KEY, "
                     "amount BIGINT NOT NULL)";
    });
}

inline void effect(idem::unit_of_work& uow, const std::string& op, const std::string& step) {
    uow.sql() << "INSERT INTO effects (op, step) VALUES (:op, :step)", soci::use(op), soci::use(step);
}

// The provider stand-in: records the request, applies the charge once per call key.
inline std::string charge(idem::database& db, const std::string& call_key, long long amount) {
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << "INSERT INTO provider_requests (call_key) VALUES (:k)", soci::use(call_key);
        // Once per call key, in each database's words.
        const bool mariadb = uow.sql().get_backend_name() == "mysql";
        uow.sql() << (mariadb ? "INSERT IGNORE INTO provider_charges (call_key, amount) VALUES (:k, :a)"
                              : "INSERT INTO provider_charges (call_key, amount) VALUES (:k, :a) "
                                "ON CONFLICT (call_key) DO NOTHING"),
            soci::use(call_key), soci::use(amount);
    });
    return "ch_" + call_key.substr(call_key.size() - 8);
}

// Where a worker stops to be killed: "hold" after the hold committed,
// "charging" inside the call before the provider is asked, "charge" after the
// provider applied it, "charged" after the call's answer is stored; the hook
// is called with each name in turn.
using crash_hook = std::function<void(const std::string& point)>;

// How often `step` of operation `op` committed.
inline long long ran(idem::database& db, const std::string& op, const std::string& step) {
    return db.read([&](soci::session& sql) {
        long long n = -1;
        sql << "SELECT COUNT(*) FROM effects WHERE op = :op AND step = :step", soci::use(op), soci::use(step),
            soci::into(n);
        return n;
    });
}

inline idem::record_key key_of(const std::string& k) {
    return {"bank.payment", idem::scope::tenant("acme"), k};
}

// alice pays bob `amount` in three steps, as operation `op`; returns "hold/charge id/settled".
inline std::string pay_steps(idem::database& db, idem::steps& s, const std::string& op, long long amount,
                             const crash_hook& at = {}) {
    auto point = [&](const std::string& name) {
        if (at) at(name);
    };
    std::string hold = s.step("hold", [&](idem::unit_of_work& uow) {
        effect(uow, op, "hold");
        uow.sql() << "UPDATE accounts SET balance = balance - :a WHERE id = 'alice'", soci::use(amount);
        return std::string("held");
    });
    point("hold");
    std::string charged = s.call("charge", [&](const std::string& call_key) {
        point("charging");  // a hook that throws here is a provider that did not answer
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
}

inline idem::execution<std::string> pay(idem::database& db, const std::string& op, long long amount,
                                        const crash_hook& at = {}, const idem::execution_options& options = {}) {
    return db.steps(
        key_of(op), "pay:" + std::to_string(amount), [&](idem::steps& s) { return pay_steps(db, s, op, amount, at); },
        options);
}

// The same payment as an operation a completer can finish: its input is
// "<op> <amount>". Its compensation voids the charge at the provider (by the
// charge's call key) and gives alice the hold back.
struct payment_input {
    std::string op;
    long long amount = 0;
};

inline payment_input parse_payment(const std::string& input) {
    const auto space = input.find(' ');
    return {input.substr(0, space), std::stoll(input.substr(space + 1))};
}

inline std::string payment_input_of(const std::string& op, long long amount) {
    return op + " " + std::to_string(amount);
}

inline std::string undo_payment(idem::database& db, idem::steps& s) {
    const payment_input p = parse_payment(s.input());
    s.call("void", [&](const std::string&) {
        const std::string charge_key = s.call_key("charge");
        db.transact([&](idem::unit_of_work& uow) {
            uow.sql() << "DELETE FROM provider_charges WHERE call_key = :k", soci::use(charge_key);
        });
        return std::string("voided");
    });
    // What the operation's own steps stored says what to undo.
    const bool held = s.stored("hold").has_value();
    return s.step("release", [&](idem::unit_of_work& uow) {
        if (!held) return std::string("nothing held");
        effect(uow, p.op, "release");
        uow.sql() << "UPDATE accounts SET balance = balance + :a WHERE id = 'alice'", soci::use(p.amount);
        return std::string("compensated");
    });
}

inline idem::operation<std::string> payment(idem::database& db, crash_hook at = {}, int compensate_after = 3) {
    return {
        "bank.payment",
        [&db, at](idem::steps& s) {
            const payment_input p = parse_payment(s.input());
            return pay_steps(db, s, p.op, p.amount, at);
        },
        {.compensate = [&db](idem::steps& s) { return undo_payment(db, s); }, .compensate_after = compensate_after}};
}

inline idem::execution<std::string> pay_with(const idem::operation<std::string>& payment, idem::database& db,
                                             const std::string& op, long long amount,
                                             const idem::execution_options& options = {}) {
    return payment.run(db, key_of(op), "pay:" + std::to_string(amount), payment_input_of(op, amount), options);
}

}  // namespace idem::test::steps_bank
