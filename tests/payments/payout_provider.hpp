// The payout provider the payments service sends payouts to, as a real small
// HTTP service on loopback: its own SQLite database, and idem's own HTTP layer
// deduping by Idempotency-Key (the database form: a request's writes and its
// record in one transaction, a concurrent duplicate waiting for the first).
// It keeps every payout it applies in a table with no key on the idempotency
// key, so one applied twice would show twice; answers 422 (final) for a
// destination "declined-...", 503 (not stored: called again) for
// "unreachable-..."; and cancels by the payout's key: a payout it applied
// stands (409 with its id: money that moved is not taken back), one that
// arrives later is declined.
//
//   payout_provider provider;
//   payments_service svc({.extra = {"--provider", provider.url()}});
//   CHECK(provider.count("SELECT COUNT(*) FROM applied") == 1);
#pragma once

#include <soci/soci.h>

#include <atomic>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "idem/database.hpp"
#include "idem/http/httplib.hpp"
#include "loopback_server.hpp"
#include "temp_dir.hpp"

namespace idem::test {

class payout_provider {
public:
    payout_provider() {
        db_.migrate();
        db_.transact([](unit_of_work& uow) {
            uow.sql() << "CREATE TABLE applied (idempotency_key TEXT NOT NULL, payout TEXT NOT NULL, amount INTEGER "
                         "NOT NULL)";
            uow.sql() << "CREATE TABLE cancelled (idempotency_key TEXT PRIMARY KEY)";
        });
        auto counted = [this](http::httplib_unit_handler handler) {
            return [this, handler = std::move(handler)](unit_of_work& uow, const httplib::Request& req,
                                                        httplib::Response& res) {
                ++requests;
                handler(uow, req, res);
            };
        };
        server_.server.Post("/payouts", http::idempotent(layer_, db_,
                                                         counted([](unit_of_work& uow, const httplib::Request& req,
                                                                    httplib::Response& res) { pay(uow, req, res); })));
        server_.server.Post("/payouts/cancel",
                            http::idempotent(layer_, db_,
                                             counted([](unit_of_work& uow, const httplib::Request& req,
                                                        httplib::Response& res) { cancel(uow, req, res); })));
        server_.start();
    }

    [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

    // A number its database answers `sql` with.
    [[nodiscard]] long long count(const std::string& sql_text) {
        return db_.read([&](soci::session& sql) {
            long long n = -1;
            sql << sql_text, soci::into(n);
            return n;
        });
    }

    // Requests its handlers ran (a replay runs none).
    std::atomic<int> requests{0};

private:
    static void answer(httplib::Response& res, int status, const nlohmann::json& body) {
        res.status = status;
        res.set_content(body.dump(), "application/json");
    }

    static void pay(unit_of_work& uow, const httplib::Request& req, httplib::Response& res) {
        const auto body = nlohmann::json::parse(req.body);
        const std::string destination = body.at("destination");
        const std::string key = req.get_header_value("Idempotency-Key");
        if (destination.starts_with("unreachable")) return answer(res, 503, {{"error", "the bank is unreachable"}});
        int cancelled = 0;
        uow.sql() << "SELECT COUNT(*) FROM cancelled WHERE idempotency_key = :k", soci::use(key), soci::into(cancelled);
        if (cancelled > 0) return answer(res, 422, {{"status", "declined"}, {"reason", "cancelled"}});
        if (destination.starts_with("declined"))
            return answer(res, 422, {{"status", "declined"}, {"reason", "refused"}});
        const std::string payout = body.at("payout");
        const long long amount = body.at("amount");
        uow.sql() << "INSERT INTO applied (idempotency_key, payout, amount) VALUES (:k, :p, :a)", soci::use(key),
            soci::use(payout), soci::use(amount);
        answer(res, 201, {{"id", "pr_" + payout}, {"status", "paid"}});
    }

    static void cancel(unit_of_work& uow, const httplib::Request& req, httplib::Response& res) {
        const std::string key = nlohmann::json::parse(req.body).at("key");
        std::string payout;
        uow.sql() << "SELECT payout FROM applied WHERE idempotency_key = :k", soci::use(key), soci::into(payout);
        if (uow.sql().got_data()) return answer(res, 409, {{"status", "paid"}, {"id", "pr_" + payout}});
        uow.sql() << "INSERT INTO cancelled (idempotency_key) VALUES (:k) ON CONFLICT DO NOTHING", soci::use(key);
        answer(res, 200, {{"status", "cancelled"}});
    }

    temp_dir dir_{"provider"};
    database db_ = database::open("sqlite:" + (dir_.path() / "provider.db").string(), {.pool_size = 8});
    http::idempotency_layer layer_{db_.executor()};
    loopback_server server_;
};

}  // namespace idem::test
