#include "books.hpp"

#include <soci/soci.h>

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <utility>

namespace ledger_mirror {
namespace {

using idem::webhook::handler_result;

// The fields of `body` when it is a JSON object with exactly those, strings
// non-empty and the amount a positive integer; nothing otherwise.
std::optional<nlohmann::json> fields_of(std::string_view body, std::initializer_list<const char*> names) {
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object() || j.size() != names.size()) return std::nullopt;
    for (const char* name : names) {
        if (!j.contains(name)) return std::nullopt;
        const auto& v = j[name];
        const bool ok = std::string_view(name) == "amount" ? v.is_number_integer() && v.get<long long>() > 0
                                                           : v.is_string() && !v.get<std::string>().empty();
        if (!ok) return std::nullopt;
    }
    return j;
}

void add(soci::session& sql, const std::string& account, long long cents) {
    // An upsert, in each database's words (MariaDB: ON DUPLICATE KEY UPDATE).
    const bool mariadb = sql.get_backend_name() == "mysql";
    sql << (mariadb ? "INSERT INTO mirror_accounts (id, net) VALUES (:a, :n) ON DUPLICATE KEY UPDATE net = net + "
                      "VALUES(net)"
                    : "INSERT INTO mirror_accounts (id, net) VALUES (:a, :n) "
                      "ON CONFLICT (id) DO UPDATE SET net = mirror_accounts.net + excluded.net"),
        soci::use(account), soci::use(cents);
}

}  // namespace

void create_schema(idem::database& db) {
    const bool sqlite = db.engine() == "sqlite", mariadb = db.engine() == "mariadb";
    // position: the order events were applied in (their transactions commit in it).
    const std::string position = sqlite    ? "position INTEGER PRIMARY KEY AUTOINCREMENT"
                                 : mariadb ? "position BIGINT AUTO_INCREMENT PRIMARY KEY"
                                           : "position BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY";
    const std::string id = sqlite ? "TEXT" : "VARCHAR(255)";  // a key a server can index
    const std::string money = sqlite ? "INTEGER" : "BIGINT";
    const std::string strict = sqlite ? " STRICT" : "";
    db.transact([&](idem::unit_of_work& uow) {
        uow.sql() << "CREATE TABLE IF NOT EXISTS mirror_events (" + position +
                         ", event_id TEXT NOT NULL, topic TEXT NOT NULL, ordering_key TEXT, payload TEXT NOT NULL)" +
                         strict;
        uow.sql() << "CREATE TABLE IF NOT EXISTS mirror_accounts (id " + id + " PRIMARY KEY, net " + money +
                         " NOT NULL)" + strict;
    });
}

handler_result apply(idem::unit_of_work& uow, std::string_view id, std::string_view topic,
                     std::string_view ordering_key, std::string_view body) {
    soci::session& sql = uow.sql();
    if (topic == "transfer.completed") {
        const auto t = fields_of(body, {"id", "from", "to", "amount"});
        if (!t) return handler_result::permanent_failure("a transfer.completed event of another shape");
        const long long amount = (*t)["amount"].get<long long>();
        add(sql, (*t)["from"].get<std::string>(), -amount);
        add(sql, (*t)["to"].get<std::string>(), amount);
    } else if (topic == "deposit.applied") {
        const auto d = fields_of(body, {"event", "account", "amount"});
        if (!d) return handler_result::permanent_failure("a deposit.applied event of another shape");
        add(sql, (*d)["account"].get<std::string>(), (*d)["amount"].get<long long>());
    } else {
        return handler_result::permanent_failure("no such topic");
    }
    std::string event(id), name(topic), key(ordering_key), payload(body);
    soci::indicator key_null = ordering_key.empty() ? soci::i_null : soci::i_ok;
    sql << "INSERT INTO mirror_events (event_id, topic, ordering_key, payload) VALUES (:e, :t, :k, :p)",
        soci::use(event), soci::use(name), soci::use(key, key_null), soci::use(payload);
    return handler_result::applied();
}

std::optional<long long> net_of(soci::session& sql, const std::string& account) {
    long long net = 0;
    sql << "SELECT net FROM mirror_accounts WHERE id = :a", soci::use(account), soci::into(net);
    if (!sql.got_data()) return std::nullopt;
    return net;
}

}  // namespace ledger_mirror
