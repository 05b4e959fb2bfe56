#include "payouts.hpp"

#include <httplib.h>
#include <soci/soci.h>

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "crash_point.hpp"
#include "ledger.hpp"
#include "request.hpp"

namespace payments {
namespace {

using json = nlohmann::json;
using idem::http::response;

response json_response(int status, const json& body, const char* type = "application/json") {
    response r;
    r.status = status;
    r.body = body.dump();
    r.set_header("Content-Type", type);
    return r;
}

response problem(int status, const std::string& code, const std::string& title, const json& more = json::object()) {
    json body{{"type", "urn:payments:" + code}, {"title", title}, {"status", status}, {"code", code}};
    body.update(more);
    return json_response(status, body, "application/problem+json");
}

// Each balance change a payout's step makes: one row per committed step, with
// no key, so a step that ran twice would show twice.
void entry(soci::session& sql, const std::string& payout, const std::string& step, long long amount) {
    sql << "INSERT INTO payout_entries (payout, step, amount) VALUES (:p, :s, :a)", soci::use(payout), soci::use(step),
        soci::use(amount);
}

// Takes the amount from the account and writes the payout row: {"payout": id},
// or the refusal {"status", "code", "title"} when there is nothing to hold.
std::string hold(idem::unit_of_work& uow, const payout_request& p) {
    soci::session& sql = uow.sql();
    // One conditional statement: concurrent payouts of one account never overdraw it.
    soci::statement take =
        (sql.prepare << "UPDATE accounts SET balance = balance - :a WHERE id = :id AND balance >= :a2",
         soci::use(p.amount), soci::use(p.account), soci::use(p.amount));
    take.execute(true);
    if (take.get_affected_rows() != 1) {
        const bool exists = balance_of(sql, p.account) >= 0;
        return (exists ? json{{"status", 422}, {"code", "Payments.InsufficientFunds"}, {"title", "insufficient funds"}}
                       : json{{"status", 404}, {"code", "Payments.UnknownAccount"}, {"title", "no such account"}})
            .dump();
    }
    const std::string id = new_id("po_");
    sql << "INSERT INTO payouts (id, account, amount, destination, state) VALUES (:id, :acc, :a, :d, 'held')",
        soci::use(id), soci::use(p.account), soci::use(p.amount), soci::use(p.destination);
    entry(sql, id, "hold", -p.amount);
    return json{{"payout", id}}.dump();
}

// The hold given back: the provider declined (settle) or the payout is cancelled (compensation).
void release(soci::session& sql, const std::string& payout, const payout_request& p, const std::string& state) {
    sql << "UPDATE accounts SET balance = balance + :a WHERE id = :id", soci::use(p.amount), soci::use(p.account);
    sql << "UPDATE payouts SET state = :s WHERE id = :id", soci::use(state), soci::use(payout);
    entry(sql, payout, "release", p.amount);
}

std::string word(const std::string& answer, std::size_t n) {
    std::size_t begin = 0;
    for (std::size_t i = 0; i < n; ++i) begin = answer.find(' ', begin) + 1;
    return answer.substr(begin, answer.find(' ', begin) - begin);
}

response declined(const std::string& payout, const std::string& reason) {
    return problem(422, "Payments.PayoutDeclined", "the provider declined the payout",
                   {{"payout", payout}, {"reason", reason}});
}

response paid(const std::string& payout, const payout_request& p, const std::string& reference) {
    response r = json_response(201, {{"id", payout},
                                     {"account", p.account},
                                     {"amount", p.amount},
                                     {"destination", p.destination},
                                     {"status", "paid"},
                                     {"provider_ref", reference}});
    r.set_header("Location", "/payouts/" + payout);
    return r;
}

// Settles the payout with the provider's final answer: paid, or the hold
// released ("declined" by the provider, "cancelled" when the cancel came first).
std::string settle(soci::session& sql, const std::string& payout, const payout_request& p, const std::string& answer) {
    const std::string outcome = word(answer, 0);
    if (outcome == "paid") {
        const std::string reference = word(answer, 1);
        sql << "UPDATE payouts SET state = 'paid', provider_ref = :r WHERE id = :id", soci::use(reference),
            soci::use(payout);
        entry(sql, payout, "settle", 0);
    } else if (!payout.empty()) {
        release(sql, payout, p, outcome);
    }
    return outcome;
}

// The response for the provider's final answer.
response answered(const std::string& payout, const payout_request& p, const std::string& answer) {
    const std::string outcome = word(answer, 0);
    if (outcome == "paid") return paid(payout, p, word(answer, 1));
    if (outcome == "declined") return declined(payout, word(answer, 1));
    return problem(502, "Payments.PayoutFailed",
                   "the provider did not take the payout: it was cancelled and the funds released",
                   {{"payout", payout.empty() ? json(nullptr) : json(payout)}});
}

// The payout, run by the request and, when it dies, by the completer.
response run_payout(const provider_client& provider, idem::steps& op) {
    payout_request p;
    try {
        p = parse_payout(op.input());
    } catch (const rejected& r) {
        return problem(r.status, r.code, r.what());  // final, stored: the retry gets it again
    }
    const json held = json::parse(op.step("hold", [&](idem::unit_of_work& uow) { return hold(uow, p); }));
    if (!held.contains("payout")) return problem(held["status"], held["code"], held["title"]);
    const std::string payout = held["payout"];
    crash_point("payout.held");
    const std::string answer = op.call("send", [&](const std::string& key) {
        crash_point("payout.sending");
        std::string a = provider.pay(payout, p, key);
        crash_point("payout.sent");
        return a;
    });
    crash_point("payout.answered");
    op.step("settle", [&](idem::unit_of_work& uow) { return settle(uow.sql(), payout, p, answer); });
    crash_point("payout.settled");
    return answered(payout, p, answer);
}

// After three failed runs of the completer: what was settled stands. Money
// that moved is never cancelled: the provider's answer to the send, when it
// was stored, settles the payout as the run would have; when it was not (the
// send never answered, or the run died before storing it), the provider is
// asked to cancel by the send's call key, and says "paid" for a payout it
// made (settled as paid) or refuses the send from then on ("cancelled": the
// hold released).
response undo_payout(const provider_client& provider, idem::steps& op) {
    const payout_request p = parse_payout(op.input());
    const std::optional<std::string> held = op.stored("hold");
    const std::string payout = held ? json::parse(*held).value("payout", "") : "";
    if (op.stored("settle")) return answered(payout, p, op.stored("send").value_or(""));
    std::string answer = op.stored("send").value_or("");
    if (answer.empty())
        answer = op.call("cancel", [&](const std::string& key) { return provider.cancel(op.call_key("send"), key); });
    crash_point("payout.cancelled");
    op.step("settle", [&](idem::unit_of_work& uow) { return settle(uow.sql(), payout, p, answer); });
    return answered(payout, p, answer);
}

}  // namespace

payout_request parse_payout(const std::string& body) {
    const json j = parse_object(body, {"account", "amount", "destination"});
    return {id_field(j, "account"), cents_field(j, "amount", 1, max_amount), id_field(j, "destination")};
}

std::string provider_client::pay(const std::string& payout, const payout_request& p, const std::string& key) const {
    httplib::Client client(url_);
    client.set_connection_timeout(std::chrono::seconds(2));
    client.set_read_timeout(std::chrono::seconds(5));
    const std::string body = json{{"payout", payout}, {"amount", p.amount}, {"destination", p.destination}}.dump();
    const auto r = client.Post("/payouts", {{"Idempotency-Key", key}}, body, "application/json");
    if (!r) throw std::runtime_error("the payout provider did not answer: " + httplib::to_string(r.error()));
    if (r->status == 201 || r->status == 200) return "paid " + json::parse(r->body).value("id", "");
    if (r->status == 402 || r->status == 422) return "declined " + json::parse(r->body).value("reason", "declined");
    throw std::runtime_error("the payout provider answered " + std::to_string(r->status));
}

std::string provider_client::cancel(const std::string& payout_key, const std::string& key) const {
    httplib::Client client(url_);
    client.set_connection_timeout(std::chrono::seconds(2));
    client.set_read_timeout(std::chrono::seconds(5));
    const auto r = client.Post("/payouts/cancel", {{"Idempotency-Key", key}}, json{{"key", payout_key}}.dump(),
                               "application/json");
    if (!r) throw std::runtime_error("the payout provider did not answer: " + httplib::to_string(r.error()));
    if (r->status == 409) return "paid " + json::parse(r->body).value("id", "");  // it was made: it stands
    if (r->status != 200) throw std::runtime_error("the payout provider answered " + std::to_string(r->status));
    return "cancelled";
}

idem::operation<response> payout_operation(const provider_client& provider,
                                           std::shared_ptr<const idem::result_codec<response>> codec) {
    // readme:begin payout-operation
    return {payout_namespace,
            [&provider](idem::steps& op) { return run_payout(provider, op); },
            {.compensate = [&provider](idem::steps& op) { return undo_payout(provider, op); },
             .compensate_after = 3,
             .codec = std::move(codec)}};
    // readme:end payout-operation
}

}  // namespace payments
