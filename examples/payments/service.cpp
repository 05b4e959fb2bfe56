#include "service.hpp"

#include <httplib.h>
#include <idem/http/fingerprint.hpp>
#include <idem/http/httplib.hpp>
#include <idem/http/key_header.hpp>
#include <idem/keys.hpp>
#include <idem/webhook.hpp>
#include <nlohmann/json.hpp>

#include <thread>

namespace payments {
namespace {

using json = nlohmann::json;

// A failure the client must fix; its response is final (stored and replayed).
struct rejected : std::runtime_error {
    rejected(int s, std::string c, const std::string& detail) : std::runtime_error(detail), status(s), code(std::move(c)) {}
    int status;
    std::string code;
};

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
}

void send_problem(httplib::Response& res, const rejected& r) {
    res.status = r.status;
    res.set_content(json{{"type", "urn:payments:" + r.code}, {"title", r.what()}, {"status", r.status}, {"code", r.code}}.dump(),
                    "application/problem+json");
}

json parse_object(const std::string& body) {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object()) throw rejected(400, "Payments.MalformedBody", "the body is not a JSON object");
    return j;
}

std::string text_field(const json& j, const char* name) {
    if (!j.contains(name) || !j[name].is_string() || j[name].get<std::string>().empty())
        throw rejected(400, "Payments.MalformedBody", std::string(name) + " must be a non-empty string");
    return j[name].get<std::string>();
}

long long amount_field(const json& j, const char* name) {
    if (!j.contains(name) || !j[name].is_number_integer() || j[name].get<long long>() <= 0)
        throw rejected(400, "Payments.MalformedBody", std::string(name) + " must be a positive integer (cents)");
    return j[name].get<long long>();
}

// The demo's authentication: "Authorization: Bearer CLIENT" names the calling client.
idem::claims claims_of(const httplib::Request& req) {
    const std::string auth = req.get_header_value("Authorization");
    if (auth.starts_with("Bearer ") && auth.size() > 7) return {{"client_id", auth.substr(7)}};
    return {};
}

// Moves `amount` cents; throws `rejected` (before any write) when it cannot.
void move_money(soci::session& s, const std::string& id, const std::string& from, const std::string& to,
                long long amount) {
    long long from_balance = -1, to_exists = 0;
    soci::indicator found = soci::i_null;
    s << "SELECT balance FROM accounts WHERE id = :id", soci::use(from), soci::into(from_balance, found);
    s << "SELECT COUNT(*) FROM accounts WHERE id = :id", soci::use(to), soci::into(to_exists);
    if (found != soci::i_ok || to_exists == 0) throw rejected(404, "Payments.UnknownAccount", "no such account");
    if (from_balance < amount) throw rejected(422, "Payments.InsufficientFunds", "insufficient funds");
    s << "UPDATE accounts SET balance = balance - :a WHERE id = :id", soci::use(amount), soci::use(from);
    s << "UPDATE accounts SET balance = balance + :a WHERE id = :id", soci::use(amount), soci::use(to);
    s << "INSERT INTO transfers (id, from_account, to_account, amount) VALUES (:id, :f, :t, :a)", soci::use(id),
        soci::use(from), soci::use(to), soci::use(amount);
}

}  // namespace

service::service(database& db, service_options options, std::shared_ptr<idem::telemetry_sink> telemetry)
    : db_(db),
      options_(std::move(options)),
      records_(db.store(), {}, telemetry),
      layer_(db.store(), {.require_key = true, .resolver = idem::scopes::client()}, telemetry) {}

void service::mount(httplib::Server& server) {
    const idem::http::httplib_options auth{.claims_of = claims_of};

    // POST /accounts {"id": "alice", "balance": 10000}: opening balance in cents.
    server.Post("/accounts", idem::http::idempotent(layer_, [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const json body = parse_object(req.body);
            const std::string id = text_field(body, "id");
            const long long balance = body.contains("balance") ? amount_field(body, "balance") : 0;
            const bool created = db_.with_connection([&](connection& c) {
                return c.runner->run([&](idem::transaction& tx) {
                    long long exists = 0;
                    tx.session() << "SELECT COUNT(*) FROM accounts WHERE id = :id", soci::use(id), soci::into(exists);
                    if (exists == 0)
                        tx.session() << "INSERT INTO accounts (id, balance) VALUES (:id, :b)", soci::use(id), soci::use(balance);
                    return exists == 0;
                });
            });
            if (!created) throw rejected(409, "Payments.AccountExists", "the account exists");
            res.set_header("Location", "/accounts/" + id);
            send_json(res, 201, {{"id", id}, {"balance", balance}});
        } catch (const rejected& r) {
            send_problem(res, r);
        }
    }, auth));

    server.Get(R"(/accounts/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        long long balance = 0;
        soci::indicator found = soci::i_null;
        db_.with_connection([&](connection& c) {
            c.session << "SELECT balance FROM accounts WHERE id = :id", soci::use(id), soci::into(balance, found);
        });
        if (found != soci::i_ok) return send_problem(res, rejected(404, "Payments.UnknownAccount", "no such account"));
        send_json(res, 200, {{"id", id}, {"balance", balance}});
    });

    // POST /transfers {"from": "alice", "to": "bob", "amount": 2500} with an Idempotency-Key.
    // The layer answers retries (replay, 409, 422) before any business table is touched;
    // inside, the transfer and its own record share one transaction, so even a retry
    // after the layer's lease ran out cannot move the money twice.
    server.Post("/transfers", idem::http::idempotent(layer_, [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const json body = parse_object(req.body);
            const std::string from = text_field(body, "from"), to = text_field(body, "to");
            const long long amount = amount_field(body, "amount");
            if (from == to) throw rejected(400, "Payments.SameAccount", "from and to are the same account");
            if (options_.processing_delay.count() > 0) std::this_thread::sleep_for(options_.processing_delay);

            const std::string client = claims_of(req).at("client_id");
            const std::string key = idem::http::parse_key_header(std::vector<std::string_view>{
                                                                     req.get_header_value("Idempotency-Key")})
                                        .key;
            const std::string transfer_id = idem::keys::to_uuid_v5("transfer", {client, key});
            const idem::record_key record("payments.transfer", idem::scope::client(client), key);
            const std::string receipt = db_.with_connection([&](connection& c) {
                return c.runner->run([&](idem::transaction& tx) {
                    auto e = records_.execute(tx, record, idem::http::request_fingerprint("POST", req.target, req.body), {},
                                              [&] {
                                                  move_money(tx.session(), transfer_id, from, to, amount);
                                                  return json{{"id", transfer_id}, {"from", from}, {"to", to},
                                                              {"amount", amount}}.dump();
                                              },
                                              idem::string_codec{});
                    if (e.status() == idem::execution_status::key_reused)
                        throw rejected(422, "Idempotency.KeyReused", "this key was used for another transfer");
                    return e.value();
                });
            });
            res.set_header("Location", "/transfers/" + transfer_id);
            res.status = 201;
            res.set_content(receipt, "application/json");
        } catch (const rejected& r) {
            send_problem(res, r);
        }
    }, auth));

    server.Get(R"(/transfers/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        std::string from, to;
        long long amount = 0;
        soci::indicator found = soci::i_null;
        db_.with_connection([&](connection& c) {
            c.session << "SELECT from_account, to_account, amount FROM transfers WHERE id = :id", soci::use(id),
                soci::into(from, found), soci::into(to), soci::into(amount);
        });
        if (found != soci::i_ok) return send_problem(res, rejected(404, "Payments.UnknownTransfer", "no such transfer"));
        send_json(res, 200, {{"id", id}, {"from", from}, {"to", to}, {"amount", amount}});
    });

    // POST /webhooks/provider: a signed deposit event {"id": "evt_1", "account": "alice", "amount": 500}.
    // The signature is checked over the raw bytes before the event id is claimed; the
    // deposit and the event's record commit together; a redelivery gets the same 200.
    server.Post("/webhooks/provider", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            if (!idem::webhook::signature_matches(options_.webhook_secret, req.body,
                                                  req.get_header_value("X-Signature")))
                throw rejected(401, "Payments.BadSignature", "the signature does not match the body");
            const json event = parse_object(req.body);
            const std::string id = text_field(event, "id"), account = text_field(event, "account");
            const long long amount = amount_field(event, "amount");
            const auto record = idem::webhook::event_key("provider", id, idem::scope::custom("account", account));
            const auto outcome = db_.with_connection([&](connection& c) {
                return c.runner->run([&](idem::transaction& tx) {
                    return records_.execute(tx, record, idem::webhook::fingerprint, {.retention = std::chrono::days(30)},
                                            [&] {
                                                long long updated = 0;
                                                soci::statement st = (tx.session().prepare
                                                    << "UPDATE accounts SET balance = balance + :a WHERE id = :id",
                                                    soci::use(amount), soci::use(account));
                                                st.execute(true);
                                                updated = st.get_affected_rows();
                                                if (updated != 1)
                                                    throw rejected(422, "Payments.UnknownAccount", "no such account");
                                                tx.session() << "INSERT INTO deposits (event_id, account, amount) "
                                                                "VALUES (:e, :a, :m)",
                                                    soci::use(id), soci::use(account), soci::use(amount);
                                                return json{{"event", id}, {"applied", true}}.dump();
                                            },
                                            idem::string_codec{});
                });
            });
            res.set_header("Idempotent-Replayed",
                           outcome.status() == idem::execution_status::replayed ? "true" : "false");
            res.status = 200;
            res.set_content(outcome.value(), "application/json");
        } catch (const rejected& r) {
            send_problem(res, r);
        }
    });
}

}  // namespace payments
