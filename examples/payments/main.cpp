// idem-payments: a money-movement HTTP service with idempotent transfers and
// deduplicated, signed provider webhooks, on SQLite or PostgreSQL.
//
//   idem-payments [--db URL] [--host ADDR] [--port N] [--threads N] [--mode off|observe|enforce]
//                 [--webhook-secret SECRET] [--processing-delay MS] [--transaction-pooler]
//                 [--lease SECONDS]
//
// GET /metrics serves the idempotency decisions in the Prometheus text format.
#include <CLI/CLI.hpp>
#include <httplib.h>
#include <idem/database.hpp>
#include <idem/telemetry.hpp>

#include <csignal>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include "ledger.hpp"
#include "service.hpp"

namespace {

httplib::Server* running = nullptr;

void stop(int) {
    if (running != nullptr) running->stop();
}

struct flags {
    std::string db = "sqlite:payments.db";
    std::string host = "127.0.0.1";
    int port = 8080;
    bool transaction_pooler = false;
    int lease_seconds = 60;
    int threads = 8;
    std::string mode = "enforce";
    std::string webhook_secret = "whsec-demo";
    int processing_delay_ms = 0;
};

// An answer for what escaped a handler: problem+json with a correlation id; the
// exception's text (SQL, values) goes to the log only.
void answer_exception(const httplib::Request& req, httplib::Response& res, std::exception_ptr failure) {
    thread_local std::mt19937_64 random{std::random_device{}()};
    const std::string correlation = std::to_string(random());
    std::string detail = "unknown exception";
    bool transient = false;
    try {
        std::rethrow_exception(failure);
    } catch (const idem::error& e) {
        detail = e.what();
        transient = e.rolled_back() || e.is_transient();
    } catch (const std::exception& e) {
        detail = e.what();
    } catch (...) {
    }
    std::clog << "idem-payments: " << req.method << " " << req.path << " failed (correlation " << correlation
              << "): " << detail << std::endl;
    res.status = transient ? 503 : 500;
    if (transient) res.set_header("Retry-After", "1");
    res.set_content(std::string("{\"type\":\"urn:payments:") + (transient ? "Payments.Unavailable" : "Payments.Internal") +
                        "\",\"title\":\"" + (transient ? "the ledger is unavailable; retry" : "internal error") +
                        "\",\"status\":" + std::to_string(res.status) + ",\"correlation_id\":\"" + correlation + "\"}",
                    "application/problem+json");
}

}  // namespace

int main(int argc, char** argv) {
    flags f;
    CLI::App app{"idem-payments: accounts, idempotent transfers and signed provider webhooks over HTTP",
                 "idem-payments"};
    app.set_version_flag("--version", "idem-payments 0.1.0");
    app.add_option("--db", f.db, std::string("The database: ") + std::string(idem::database_url_forms))
        ->check([](const std::string& url) {
            try {
                (void)idem::database_url::parse(url);
                return std::string();
            } catch (const std::invalid_argument& e) {
                return std::string(e.what());
            }
        })
        ->capture_default_str();
    app.add_option("--host", f.host, "Address to listen on")->capture_default_str();
    app.add_option("--port", f.port, "Port to listen on (0: any free port)")
        ->check(CLI::Range(0, 65535))
        ->capture_default_str();
    app.add_option("--threads", f.threads, "Request threads, and database sessions")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("--mode", f.mode, "Idempotency: off, observe (count, never answer for it) or enforce")
        ->check(CLI::IsMember({"off", "observe", "enforce"}))
        ->capture_default_str();
    app.add_option("--webhook-secret", f.webhook_secret, "The provider's HMAC-SHA256 signing secret")
        ->check([](const std::string& s) { return s.empty() ? std::string("must not be empty") : std::string(); });
    app.add_option("--processing-delay", f.processing_delay_ms,
                   "Milliseconds of simulated fraud check per transfer (shows 409 for concurrent retries)")
        ->check(CLI::Range(0, 60000))
        ->capture_default_str();
    app.add_option("--lease", f.lease_seconds,
                   "Seconds a request holds its key when the process dies before answering")
        ->check(CLI::Range(1, 900))
        ->capture_default_str();
    app.add_flag("--transaction-pooler", f.transaction_pooler,
                 "PostgreSQL reached through a pooler in transaction mode (PgBouncer pool_mode=transaction)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }

    try {
        const idem::mode mode = idem::parse_mode(f.mode);
        auto metrics = std::make_shared<idem::metrics_sink>();
        auto logs = std::make_shared<idem::log_sink>(std::clog, idem::log_level::warning);
        auto telemetry =
            std::make_shared<idem::fanout_sink>(std::vector<std::shared_ptr<idem::telemetry_sink>>{metrics, logs});
        idem::database db = idem::database::open(
            f.db, {.pool_size = static_cast<std::size_t>(f.threads),
                   .executor = {.mode = mode},
                   .telemetry = telemetry,
                   .transaction_pooler = f.transaction_pooler});
        db.migrate();
        payments::create_schema(db);
        payments::service svc(db,
                              {.webhook_secret = f.webhook_secret,
                               .processing_delay = std::chrono::milliseconds(f.processing_delay_ms),
                               .mode = mode,
                               .lease = std::chrono::seconds(f.lease_seconds)},
                              telemetry);
        httplib::Server server;
        const auto threads = static_cast<std::size_t>(f.threads);
        server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
        server.set_exception_handler(answer_exception);
        svc.mount(server);
        server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics->render_prometheus(), "text/plain; version=0.0.4");
        });
        running = &server;
        std::signal(SIGINT, stop);
        std::signal(SIGTERM, stop);
        const int bound = f.port == 0 ? server.bind_to_any_port(f.host) : (server.bind_to_port(f.host, f.port) ? f.port : -1);
        if (bound <= 0) {
            std::cerr << "idem-payments: cannot listen on " << f.host << ":" << f.port << "\n";
            return 1;
        }
        std::cout << "idem-payments listening on http://" << f.host << ":" << bound << " ("
                  << (db.backend() == idem::database_url::backend::postgresql ? "PostgreSQL" : "SQLite") << ", "
                  << f.mode << ")" << std::endl;
        server.listen_after_bind();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "idem-payments: " << e.what() << "\n";
        return 1;
    }
}
