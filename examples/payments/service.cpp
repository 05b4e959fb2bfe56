#include "service.hpp"

#include <httplib.h>
#include <soci/soci.h>
#include <idem/http/httplib.hpp>
#include <nlohmann/json.hpp>

#include <thread>

#include "crash_point.hpp"
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

// The write routes take JSON only: anything else is 415, before idempotency is
// involved (so a client that fixes the header may retry with the same key).
httplib::Server::Handler json_only(httplib::Server::Handler handler) {
    return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        if (!is_json_media_type(req.get_header_value("Content-Type")))
            return send_problem(res, 415, "Payments.UnsupportedMediaType", "the body must be application/json");
        handler(req, res);
    };
}

}  // namespace

service::service(idem::database& db, service_options options)
    : db_(db),
      options_(std::move(options)),
      layer_(db.executor(), {.resolver = idem::scopes::client()}),
      provider_(db.executor(), {.provider = "provider",
                                .scheme = idem::webhook::timestamped_signature{.header = "Provider-Signature"},
                                .secrets = options_.webhook_secrets,
                                .identify = idem::webhook::id_from_json("id", idem::scope::custom("provider", "demo")),
                                .execution = {.retention = std::chrono::days(30)}}),
      payout_provider_(options_.provider_url),
      payouts_(payout_operation(payout_provider_, layer_.operation_codec())) {}

void service::mount(httplib::Server& server) {
    const idem::http::httplib_options auth{.claims_of = claims_of};

    // POST /accounts {"id": "alice", "balance": 10000}: opening balance in cents.
    server.Post("/accounts", json_only(idem::http::idempotent(
                                 layer_, db_,
                                 [](idem::unit_of_work& uow, const httplib::Request& req, httplib::Response& res) {
                                     try {
                                         const json body = parse_object(req.body, {"id", "balance"});
                                         const std::string id = id_field(body, "id");
                                         const long long balance = body.contains("balance")
                                                                       ? cents_field(body, "balance", 0, max_balance)
                                                                       : 0;
                                         if (!open_account(uow, id, balance))
                                             throw rejected(409, "Payments.AccountExists", "the account exists");
                                         res.set_header("Location", "/accounts/" + id);
                                         send_json(res, 201, {{"id", id}, {"balance", balance}});
                                     } catch (const rejected& r) {
                                         send_problem(res, r);
                                     }
                                 },
                                 auth)));

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
    // The transfer and its record share one unit of work: the layer answers a retry
    // with the stored response, a concurrent duplicate waits for the first and gets
    // its replay, and a refusal (422 insufficient funds) rolls back what was written.
    server.Post("/transfers",
                json_only(idem::http::idempotent(
                    layer_, db_,
                    [this](idem::unit_of_work& uow, const httplib::Request& req, httplib::Response& res) {
                        try {
                            const json body = parse_object(req.body, {"from", "to", "amount"});
                            const std::string from = id_field(body, "from"), to = id_field(body, "to");
                            const long long amount = cents_field(body, "amount", 1, max_amount);
                            if (from == to)
                                throw rejected(400, "Payments.SameAccount", "from and to are the same account");
                            if (options_.processing_delay.count() > 0)
                                std::this_thread::sleep_for(options_.processing_delay);
                            crash_point("before_writes");
                            const std::string id = new_id("tr_");
                            move_money(uow, id, from, to, amount);
                            crash_point("after_writes");
                            res.set_header("Location", "/transfers/" + id);
                            send_json(res, 201, {{"id", id}, {"from", from}, {"to", to}, {"amount", amount}});
                        } catch (const rejected& r) {
                            send_problem(res, r);
                        }
                    },
                    auth)));

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

    // POST /webhooks/provider: a deposit event {"id": "evt_1", "account": "alice", "amount": 500},
    // signed "Provider-Signature: t=<unix seconds>,v1=<hex>". The receiver verifies the
    // signature before it claims the event id, and answers as providers expect: 200 for
    // an event applied or refused for good (a redelivery replays it), 503 for one that may
    // apply later (an account not opened yet: its writes rolled back, the provider redelivers).
    server.Post("/webhooks/provider", json_only([this](const httplib::Request& req, httplib::Response& res) {
                    const std::string signature = req.get_header_value("Provider-Signature");
                    const idem::webhook::delivery d{.body = req.body, .headers = {{"Provider-Signature", signature}}};
                    try {
                        const idem::webhook::answer a =
                            provider_.handle(db_, d, [](idem::unit_of_work& uow, const idem::webhook::event& e) {
                                return apply_deposit(uow, e.id, e.body);
                            });
                        if (a.retry_after > 0) res.set_header("Retry-After", std::to_string(a.retry_after));
                        if (a.verdict == idem::webhook::verdict::duplicate)
                            res.set_header("Idempotent-Replayed", "true");
                        res.status = a.status;
                        res.set_content(a.body, "application/json");
                    } catch (const idem::error&) {
                        send_unavailable(res);  // rolled back or in doubt: the provider redelivers
                    }
                }));

    // POST /payouts {"account": "alice", "amount": 2500, "destination": "acct_9"} with an
    // Idempotency-Key: hold, send to the provider (its call key as the provider's
    // Idempotency-Key), settle. A request that does not finish it answers 202 with
    // where it stands and Retry-After; the completer finishes it, and the retry
    // gets the final answer (201 paid, 422 declined, 502 cancelled).
    // readme:begin payouts-route
    server.Post("/payouts", json_only([this, payout = idem::http::idempotent(layer_, db_, payouts_, auth)](
                                          const httplib::Request& req, httplib::Response& res) {
                    if (options_.provider_url.empty())
                        return send_problem(res, 503, "Payments.NoProvider", "no payout provider is configured");
                    payout(req, res);
                }));
    // readme:end payouts-route

    server.Get(R"(/payouts/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const std::string id = path_id(req.matches[1], "payout");
            json payout;
            const bool found = db_.read([&](soci::session& sql) {
                std::string account, destination, state, reference;
                long long amount = 0;
                soci::indicator reference_null = soci::i_ok;
                sql << "SELECT account, amount, destination, state, provider_ref FROM payouts WHERE id = :id",
                    soci::use(id), soci::into(account), soci::into(amount), soci::into(destination), soci::into(state),
                    soci::into(reference, reference_null);
                payout = {
                    {"id", id},         {"account", account},
                    {"amount", amount}, {"destination", destination},
                    {"status", state},  {"provider_ref", reference_null == soci::i_ok ? json(reference) : json()}};
                return sql.got_data();
            });
            if (!found) throw rejected(404, "Payments.UnknownPayout", "no such payout");
            send_json(res, 200, payout);
        } catch (const rejected& r) {
            send_problem(res, r);
        } catch (const idem::error&) {
            send_unavailable(res);
        }
    });

    // The answer has been committed; the process may die before it is sent.
    server.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
        if (req.path == "/transfers" && res.status == 201) crash_point("after_commit");
    });
}

}  // namespace payments
