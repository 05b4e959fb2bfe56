// idem-ledger-mirror: a second service that keeps a mirror of the payments
// service's ledger from the events it publishes, each applied exactly once, on
// a database of its own (SQLite or PostgreSQL).
//
//   idem-ledger-mirror [--db URL] [--host ADDR] [--port N] [--threads N] [--secret SECRET]...
//   idem relay --db PAYMENTS_DB --to http://127.0.0.1:8081/events --secret SECRET
//
// POST /events takes what `idem relay` delivers (idem::http::webhook_sink):
// verified with idem::webhook::receiver (the timestamped signature, any of the
// secrets), deduplicated by the Idem-Message-Id header in the same transaction
// as the mirror's writes, so a redelivery after a crash applies nothing.
// GET /accounts/{id} answers {"id","net"}: what the events did to the account.
#include <httplib.h>
#include <CLI/CLI.hpp>
#include <idem/database.hpp>
#include <idem/http/httplib.hpp>
#include <idem/store_registry.hpp>
#include <idem/webhook.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "books.hpp"

namespace {

httplib::Server* running = nullptr;

void stop(int) {
    if (running != nullptr) running->stop();
}

struct flags {
    std::string db = "sqlite:ledger-mirror.db";
    std::string host = "127.0.0.1";
    int port = 8081;
    int threads = 4;
    std::vector<std::string> secrets;
};

void send_unavailable(httplib::Response& res) {
    res.status = 503;
    res.set_header("Retry-After", "1");
    res.set_content(R"({"error":"the mirror's database is unavailable; deliver again"})", "application/json");
}

// readme:begin mirror-receiver
// What `idem relay` sends (idem::http::webhook_sink): signed with the
// timestamped scheme under any of `secrets`, its message id in a header.
idem::webhook::receiver events_from_the_relay(idem::database& db, const std::vector<std::string>& secrets) {
    return {db.executor(),
            {.provider = "payments",
             .scheme = idem::webhook::timestamped_signature{},
             .secrets = secrets,
             .identify = idem::webhook::id_from_header("Idem-Message-Id", idem::scope::global())}};
}
// readme:end mirror-receiver

// readme:begin mirror-handle
// One delivery of `idem relay`: its signature verified, its message id
// recorded in the same transaction as what the event does to the books, so a
// redelivery (the relay could not tell it arrived) applies nothing again.
void receive(idem::webhook::receiver& events, idem::database& db, const httplib::Request& req, httplib::Response& res) {
    idem::webhook::delivery d{.body = req.body};
    for (const auto& [name, value] : req.headers) d.headers.emplace_back(name, value);
    const std::string topic = req.get_header_value("Idem-Topic");
    const std::string account = req.get_header_value("Idem-Ordering-Key");
    try {
        const idem::webhook::answer a =
            events.handle(db, d, [&](idem::unit_of_work& uow, const idem::webhook::event& e) {
                return ledger_mirror::apply(uow, e.id, topic, account, e.body);
            });
        if (a.retry_after > 0) res.set_header("Retry-After", std::to_string(a.retry_after));
        res.status = a.status;  // 200 applied or a duplicate; 5xx: the relay delivers it again later
        res.set_content(a.body, "application/json");
    } catch (const idem::error&) {
        send_unavailable(res);  // rolled back or in doubt: the relay delivers it again
    }
}
// readme:end mirror-handle

}  // namespace

int main(int argc, char** argv) {
    flags f;
    CLI::App app{"idem-ledger-mirror: the payments events, each applied once, in a database of its own",
                 "idem-ledger-mirror"};
    app.add_option("--db", f.db, "The mirror's database: " + idem::database_url_forms())->capture_default_str();
    app.add_option("--host", f.host, "Address to listen on")->capture_default_str();
    app.add_option("--port", f.port, "Port to listen on (0: any free port)")
        ->check(CLI::Range(0, 65535))
        ->capture_default_str();
    app.add_option("--threads", f.threads, "Request threads, and database sessions")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("--secret", f.secrets,
                   "The relay's signing secret (repeat it while rotating: any one verifies); default whsec-relay-demo")
        ->check([](const std::string& s) { return s.empty() ? std::string("must not be empty") : std::string(); });
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }

    try {
        if (f.secrets.empty()) f.secrets.emplace_back("whsec-relay-demo");
        idem::database db = idem::database::open(f.db, {.pool_size = static_cast<std::size_t>(f.threads)});
        db.migrate();
        ledger_mirror::create_schema(db);
        idem::webhook::receiver payments_events = events_from_the_relay(db, f.secrets);

        httplib::Server server;
        const auto threads = static_cast<std::size_t>(f.threads);
        server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
        server.Post("/events", [&](const httplib::Request& req, httplib::Response& res) {
            receive(payments_events, db, req, res);
        });
        server.Get(R"(/accounts/([A-Za-z0-9_.-]{1,64}))", [&](const httplib::Request& req, httplib::Response& res) {
            const std::string id = req.matches[1];
            try {
                const auto net = db.read([&](soci::session& sql) { return ledger_mirror::net_of(sql, id); });
                res.status = net ? 200 : 404;
                res.set_content(net ? nlohmann::json{{"id", id}, {"net", *net}}.dump()
                                    : nlohmann::json{{"error", "no event named this account"}}.dump(),
                                "application/json");
            } catch (const idem::error&) {
                send_unavailable(res);
            }
        });

        running = &server;
        std::signal(SIGINT, stop);
        std::signal(SIGTERM, stop);
        int bound = 0;
        try {
            bound = idem::http::bind_with_backlog(server, f.host, f.port);
        } catch (const std::system_error& e) {
            std::cerr << "idem-ledger-mirror: cannot listen on " << f.host << ":" << f.port << ": " << e.what() << "\n";
            return 1;
        }
        std::cout << "idem-ledger-mirror listening on http://" << f.host << ":" << bound << " ("
                  << idem::registered_store(db.engine())->display_name << ")" << std::endl;
        server.listen_after_bind();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "idem-ledger-mirror: " << e.what() << "\n";
        return 1;
    }
}
