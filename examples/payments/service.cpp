#include "service.hpp"

#include <httplib.h>
#include <soci/soci.h>
#include <idem/http/fingerprint.hpp>
#include <idem/http/httplib.hpp>
#include <idem/http/key_header.hpp>
#include <idem/webhook.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <random>
#include <thread>

#include "ledger.hpp"
#include "request.hpp"

namespace payments {
namespace {

using json = nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
}

void send_problem(httplib::Response& res, int status, const std::string& code, const std::string& title) {
    res.status = status;
    res.set_content(json{{"type", "urn:payments:" + code}, {"title", title}, {"status", status}, {"code", code}}.dump(),
                    "application/problem+json");
}

void send_problem(httplib::Response& res, const rejected& r) {
    send_problem(res, r.status, r.code, r.what());
}

// The database could not do it now and nothing was written: the client retries.
void send_unavailable(httplib::Response& res) {
    res.set_header("Retry-After", "1");
    send_problem(res, 503, "Payments.Unavailable", "the ledger is unavailable; retry");
}

// The demo's authentication (bearer_client): the claims the layer scopes keys by.
idem::claims claims_of(const httplib::Request& req) {
    if (auto client = bearer_client(req.get_header_value("Authorization"))) return {{"client_id", std::move(*client)}};
    return {};
}

// A new id for every run of the work, never derived from the idempotency key:
// in Observe a retry runs the work again and must not collide with the first row.
std::string new_id(const char* prefix) {
    thread_local std::mt19937_64 random{std::random_device{}()};
    return prefix + std::to_string(random());
}

// A test-only fault point: IDEM_PAYMENTS_CRASH_AT names a step; the process dies
// there (SIGKILL: no cleanup, no answer), as a crash would.
void crash_point(const char* step) {
    static const char* const chosen = std::getenv("IDEM_PAYMENTS_CRASH_AT");
    if (chosen != nullptr && std::string_view(chosen) == step) std::raise(SIGKILL);
}

}  // namespace

service::service(idem::database& db, service_options options)
    : db_(db), options_(std::move(options)), layer_(db.executor(), {.resolver = idem::scopes::client()}) {}

void service::mount(httplib::Server& server) {
    const idem::http::httplib_options auth{.claims_of = claims_of};

    // POST /accounts {"id": "alice", "balance": 10000}: opening balance in cents.
    server.Post("/accounts",
                idem::http::idempotent(
                    layer_,
                    [this](const httplib::Request& req, httplib::Response& res) {
                        try {
                            const json body = parse_object(req.body, {"id", "balance"});
                            const std::string id = id_field(body, "id");
                            const long long balance =
                                body.contains("balance") ? cents_field(body, "balance", 0, max_balance) : 0;
                            if (!db_.transact([&](idem::unit_of_work& uow) { return open_account(uow, id, balance); }))
                                throw rejected(409, "Payments.AccountExists", "the account exists");
                            res.set_header("Location", "/accounts/" + id);
                            send_json(res, 201, {{"id", id}, {"balance", balance}});
                        } catch (const rejected& r) {
                            send_problem(res, r);
                        }
                    },
                    auth));

    server.Get(R"(/accounts/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const std::string id = path_id(req.matches[1], "account");
            const long long balance = db_.read([&](soci::session& sql) { return balance_of(sql, id); });
            if (balance < 0) throw rejected(404, "Payments.UnknownAccount", "no such account");
            send_json(res, 200, {{"id", id}, {"balance", balance}});
        } catch (const rejected& r) {
            send_problem(res, r);
        } catch (const idem::error&) {
            send_unavailable(res);
        }
    });

    // POST /transfers {"from": "alice", "to": "bob", "amount": 2500} with an Idempotency-Key.
    // The layer answers retries (replay, 409, 422) before any business table is touched;
    // inside, the transfer and its own record share one transaction (db.once), so even a
    // retry after the layer's lease ran out cannot move the money twice. A failure of the
    // database that rolled everything back propagates: the layer frees the key at once.
    server.Post("/transfers",
                idem::http::idempotent(
                    layer_,
                    [this](const httplib::Request& req, httplib::Response& res) {
                        try {
                            const json body = parse_object(req.body, {"from", "to", "amount"});
                            const std::string from = id_field(body, "from"), to = id_field(body, "to");
                            const long long amount = cents_field(body, "amount", 1, max_amount);
                            if (from == to)
                                throw rejected(400, "Payments.SameAccount", "from and to are the same account");
                            if (options_.processing_delay.count() > 0)
                                std::this_thread::sleep_for(options_.processing_delay);

                            const std::string client = claims_of(req).at("client_id");
                            const std::string key =
                                idem::http::parse_key_header(
                                    std::vector<std::string_view>{req.get_header_value("Idempotency-Key")})
                                    .key;
                            const idem::record_key record("payments.transfer", idem::scope::client(client), key);
                            auto e = db_.once(
                                record, idem::http::request_fingerprint("POST", req.target, req.body),
                                [&](idem::unit_of_work& uow) {
                                    crash_point("after_reserve");
                                    const std::string id = new_id("tr_");
                                    move_money(uow, id, from, to, amount);
                                    crash_point("after_writes");
                                    return json{{"id", id}, {"from", from}, {"to", to}, {"amount", amount}}.dump();
                                });
                            if (e.status() == idem::execution_status::key_reused)
                                throw rejected(422, "Idempotency.KeyReused", "this key was used for another transfer");
                            if (!e.has_value())
                                throw rejected(409, "Idempotency.InFlight", "this transfer is still being processed");
                            crash_point("after_commit");
                            const json receipt = json::parse(e.value());
                            res.set_header("Location", "/transfers/" + receipt["id"].get<std::string>());
                            res.status = 201;
                            res.set_content(e.value(), "application/json");
                        } catch (const rejected& r) {
                            send_problem(res, r);
                        }
                    },
                    auth));

    server.Get(R"(/transfers/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const std::string id = path_id(req.matches[1], "transfer");
            std::string from, to;
            long long amount = 0;
            const bool found = db_.read([&](soci::session& sql) {
                sql << "SELECT from_account, to_account, amount FROM transfers WHERE id = :id", soci::use(id),
                    soci::into(from), soci::into(to), soci::into(amount);
                return sql.got_data();
            });
            if (!found) throw rejected(404, "Payments.UnknownTransfer", "no such transfer");
            send_json(res, 200, {{"id", id}, {"from", from}, {"to", to}, {"amount", amount}});
        } catch (const rejected& r) {
            send_problem(res, r);
        } catch (const idem::error&) {
            send_unavailable(res);
        }
    });

    // POST /webhooks/provider: a signed deposit event {"id": "evt_1", "account": "alice", "amount": 500}.
    // The signature is checked over the raw bytes before the event id is claimed. The
    // deposit and the event's record commit together; a redelivery gets the same answer.
    // An event that can never apply (unknown account, balance limit) is answered 200
    // with the failure stored, so the provider stops redelivering it; a failure of the
    // database stores nothing and answers 503, so the provider redelivers.
    server.Post("/webhooks/provider", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            if (!idem::webhook::signature_matches(options_.webhook_secret, req.body,
                                                  req.get_header_value("X-Signature")))
                throw rejected(401, "Payments.BadSignature", "the signature does not match the body");
            const json event = parse_object(req.body, {"id", "account", "amount"});
            const std::string id = id_field(event, "id"), account = id_field(event, "account");
            const long long amount = cents_field(event, "amount", 1, max_amount);
            const auto record = idem::webhook::event_key("provider", id, idem::scope::custom("provider", "demo"));
            auto e = db_.once(record, idem::webhook::fingerprint,
                              [&](idem::unit_of_work& uow) {
                                  std::string why_not;
                                  if (!deposit(uow, id, account, amount, why_not))
                                      return json{{"event", id}, {"applied", false}, {"reason", why_not}}.dump();
                                  return json{{"event", id}, {"applied", true}}.dump();
                              },
                              {.retention = std::chrono::days(30)});
            if (!e.has_value()) throw rejected(409, "Idempotency.InFlight", "this event is still being processed");
            res.set_header("Idempotent-Replayed", e.status() == idem::execution_status::replayed ? "true" : "false");
            res.status = 200;
            res.set_content(e.value(), "application/json");
        } catch (const rejected& r) {
            send_problem(res, r);
        } catch (const idem::error&) {
            send_unavailable(res);
        }
    });
}

}  // namespace payments
