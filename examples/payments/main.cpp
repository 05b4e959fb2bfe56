// idem-payments: a money-movement HTTP service with idempotent transfers and
// deduplicated, signed provider webhooks, on SQLite or PostgreSQL.
//
//   idem-payments [--db URL] [--host ADDR] [--port N] [--threads N] [--backlog N]
//                 [--mode off|observe|enforce | --options FILE] [--lease SECONDS]
//                 [--webhook-secret SECRET]... [--processing-delay MS] [--transaction-pooler]
//                 [--provider URL] [--no-completer] [--completer-backoff MS] [--answer-timeout MS]
//
// GET /metrics serves the idempotency decisions (and the completer's figures)
// in the Prometheus text format. The service runs the completer of its
// operations in steps (payouts) on a thread of its own, unless --no-completer.
// With --options, SIGHUP reads the file again: the mode (and every other option)
// changes for the next request, with no restart.
#include <httplib.h>
#include <CLI/CLI.hpp>
#include <idem/completer.hpp>
#include <idem/database.hpp>
#include <idem/encryption.hpp>
#include <idem/http/httplib.hpp>
#include <idem/store_registry.hpp>
#include <idem/telemetry.hpp>

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

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
    int backlog = 1024;
    std::string mode = "enforce";
    std::string options_file;
    std::vector<std::string> webhook_secrets;
    int processing_delay_ms = 0;
    std::string provider;
    bool no_completer = false;
    int completer_backoff_ms = 1000;
    std::string encryption_keys;
    // Above PostgreSQL's lock_timeout (5 s), so a request waiting for a row gets
    // its timeout answer first; well below 30 s, so requests on a frozen primary
    // are freed soon after a failover promotes another (docs/ha.md).
    int answer_timeout_ms = 6000;
};

// Reads the options file again on every SIGHUP, on a thread of its own (sigwait:
// nothing runs in a signal handler). An invalid file leaves the options in force.
void reload_on_sighup(std::shared_ptr<idem::options_source> source) {
    std::thread([source] {
        sigset_t hup;
        sigemptyset(&hup);
        sigaddset(&hup, SIGHUP);
        for (int signal = 0;;) {
            if (sigwait(&hup, &signal) != 0) continue;
            try {
                source->reload();
                std::clog << "idem-payments: options reloaded" << std::endl;
            } catch (const std::exception& e) {
                std::clog << "idem-payments: options not reloaded, the previous ones stay: " << e.what() << std::endl;
            }
        }
    }).detach();
}

}  // namespace

int main(int argc, char** argv) {
    flags f;
    CLI::App app{"idem-payments: accounts, idempotent transfers and signed provider webhooks over HTTP",
                 "idem-payments"};
    app.set_version_flag("--version", "idem-payments 0.1.0");
    app.add_option("--db", f.db, "The database: " + idem::database_url_forms())
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
    auto* mode = app.add_option("--mode", f.mode, "Idempotency: off, observe (count, never answer for it) or enforce")
                     ->check(CLI::IsMember({"off", "observe", "enforce"}))
                     ->capture_default_str();
    app.add_option("--options", f.options_file, "idem's options as JSON (mode, leases, profiles); SIGHUP reloads it")
        ->check(CLI::ExistingFile)
        ->excludes(mode);
    app.add_option("--backlog", f.backlog, "Connections that may wait to be accepted")
        ->check(CLI::Range(1, 65535))
        ->capture_default_str();
    app.add_option("--webhook-secret", f.webhook_secrets,
                   "The provider's HMAC-SHA256 signing secret (repeat it while rotating: any one verifies); "
                   "default whsec-demo")
        ->check([](const std::string& s) { return s.empty() ? std::string("must not be empty") : std::string(); });
    app.add_option("--processing-delay", f.processing_delay_ms,
                   "Milliseconds of simulated fraud check per transfer (shows 409 for concurrent retries)")
        ->check(CLI::Range(0, 60000))
        ->capture_default_str();
    app.add_option("--lease", f.lease_seconds, "Seconds a request holds its key when the process dies before answering")
        ->check(CLI::Range(1, 900))
        ->excludes("--options")
        ->capture_default_str();
    app.add_option("--provider", f.provider, "The payout provider's base URL, http://host:port (none: no payouts)")
        ->check([](const std::string& url) {
            return url.starts_with("http://") ? std::string() : std::string("must be http://host:port");
        });
    app.add_flag("--no-completer", f.no_completer,
                 "Run no completer: unfinished payouts wait for a retry or another instance's completer");
    app.add_option("--completer-backoff", f.completer_backoff_ms,
                   "Milliseconds before the completer runs a payout again after a failed run (doubled each time)")
        ->check(CLI::Range(0, 600000))
        ->capture_default_str();
    app.add_option("--encryption-keys", f.encryption_keys,
                   "A keys file (ID:HEX lines, the sealing key first): stored responses are sealed with AES-256-GCM")
        ->check(CLI::ExistingFile)
        ->excludes("--options");
    app.add_option("--answer-timeout", f.answer_timeout_ms,
                   "Milliseconds a PostgreSQL or MariaDB server may stay silent in a transaction before its "
                   "connection is ended and the request runs again or answers 503 (0: wait for good)")
        ->check(CLI::Range(0, 86'400'000))
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
        // SIGHUP is waited for by one thread: block it before any thread starts.
        sigset_t hup;
        sigemptyset(&hup);
        sigaddset(&hup, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &hup, nullptr);
        std::shared_ptr<idem::options_source> source;
        if (f.options_file.empty()) {
            source = std::make_shared<idem::options_source>(idem::executor_options{
                .mode = idem::parse_mode(f.mode),
                .lease = std::chrono::seconds(f.lease_seconds),
                .http = {.require_key = true},
                .encryption = f.encryption_keys.empty() ? nullptr
                                                        : std::make_shared<const idem::encryption_keys>(
                                                              idem::encryption_keys::from_file(f.encryption_keys))});
        } else {
            source = idem::options_source::from_json(f.options_file);
            reload_on_sighup(source);
        }
        auto metrics = std::make_shared<idem::metrics_sink>();
        auto logs = std::make_shared<idem::log_sink>(std::clog, idem::log_level::warning);
        auto telemetry =
            std::make_shared<idem::fanout_sink>(std::vector<std::shared_ptr<idem::telemetry_sink>>{metrics, logs});
        idem::database db =
            idem::database::open(f.db, {.pool_size = static_cast<std::size_t>(f.threads),
                                        .options = source,
                                        .telemetry = telemetry,
                                        .transaction_pooler = f.transaction_pooler,
                                        .answer_timeout = std::chrono::milliseconds(f.answer_timeout_ms)});
        db.migrate();
        payments::create_schema(db);
        if (f.webhook_secrets.empty()) f.webhook_secrets.emplace_back("whsec-demo");
        payments::service svc(db, {.webhook_secrets = f.webhook_secrets,
                                   .processing_delay = std::chrono::milliseconds(f.processing_delay_ms),
                                   .provider_url = f.provider});
        // Finishes payouts whose request died between their steps (every instance of a
        // fleet may run one: the fencing token keeps two from writing one payout's steps).
        std::optional<idem::completer> completer;
        // readme:begin payments-completer
        if (!f.no_completer)
            completer.emplace(db, std::vector<std::reference_wrapper<const idem::any_operation>>{svc.payouts()},
                              idem::completer_options{
                                  .idle_wait = std::chrono::milliseconds(200),
                                  .first_backoff = std::chrono::milliseconds(f.completer_backoff_ms),
                                  .max_backoff = std::chrono::milliseconds(std::max(f.completer_backoff_ms, 60000)),
                                  .telemetry = telemetry});
        // readme:end payments-completer
        httplib::Server server;
        const auto threads = static_cast<std::size_t>(f.threads);
        server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
        // Exceptions answered as problem+json (the text to the log only); NUL in headers refused.
        idem::http::protect(server, telemetry);
        svc.mount(server);
        // What no handler answered (an unknown route, a method it does not take) is problem+json too.
        server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
            if (!res.body.empty()) return;
            const std::string status = std::to_string(res.status);
            const char* title = res.status == 404 ? "no such resource" : "the request was not handled";
            res.set_content(
                std::string("{\"type\":\"about:blank\",\"title\":\"") + title + "\",\"status\":" + status + "}",
                "application/problem+json");
        });
        server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics->render_prometheus(), "text/plain; version=0.0.4");
        });
        running = &server;
        std::signal(SIGINT, stop);
        std::signal(SIGTERM, stop);
        int bound = 0;
        try {
            bound = idem::http::bind_with_backlog(server, f.host, f.port, f.backlog);
        } catch (const std::system_error& e) {
            std::cerr << "idem-payments: cannot listen on " << f.host << ":" << f.port << ": " << e.what() << "\n";
            return 1;
        }
        std::cout << "idem-payments listening on http://" << f.host << ":" << bound << " ("
                  << idem::registered_store(db.engine())->display_name << ", "
                  << idem::to_string(db.executor().resolve_mode()) << ")" << std::endl;
        // Once the port is announced: its first pass may take over payouts at once.
        if (completer) completer->start();
        server.listen_after_bind();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "idem-payments: " << e.what() << "\n";
        return 1;
    }
}
