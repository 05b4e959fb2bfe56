// idem-payments: a money-movement HTTP service with idempotent transfers and
// deduplicated, signed provider webhooks.
//
//   idem-payments [--db sqlite:payments.db | --db postgresql://...] [--host 127.0.0.1] [--port 8080]
//                 [--webhook-secret SECRET] [--processing-delay MS] [--threads N]
//
// GET /metrics serves the idempotency decisions in the Prometheus text format.
#include <httplib.h>
#include <idem/telemetry.hpp>

#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include "service.hpp"

namespace {

httplib::Server* running = nullptr;

void stop(int) {
    if (running != nullptr) running->stop();
}

}  // namespace

int main(int argc, char** argv) {
    std::string db_url = "sqlite:payments.db", host = "127.0.0.1";
    int port = 8080;
    std::size_t threads = 8;
    payments::service_options options{.webhook_secret = "whsec-demo"};
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--db") db_url = value;
        else if (flag == "--host") host = value;
        else if (flag == "--port") port = std::stoi(value);
        else if (flag == "--webhook-secret") options.webhook_secret = value;
        else if (flag == "--processing-delay") options.processing_delay = std::chrono::milliseconds(std::stol(value));
        else if (flag == "--threads") threads = std::stoul(value);
        else {
            std::cerr << "idem-payments: unknown flag " << flag << "\n";
            return 2;
        }
    }
    try {
        auto db = payments::database::open(db_url, threads);
        auto metrics = std::make_shared<idem::metrics_sink>();
        auto logs = std::make_shared<idem::log_sink>(std::clog, idem::log_level::warning);
        payments::service svc(db, options, std::make_shared<idem::fanout_sink>(
                                               std::vector<std::shared_ptr<idem::telemetry_sink>>{metrics, logs}));
        httplib::Server server;
        server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
        svc.mount(server);
        server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics->render_prometheus(), "text/plain; version=0.0.4");
        });
        running = &server;
        std::signal(SIGINT, stop);
        std::signal(SIGTERM, stop);
        const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
        if (bound <= 0) {
            std::cerr << "idem-payments: cannot listen on " << host << ":" << port << "\n";
            return 1;
        }
        std::cout << "idem-payments listening on http://" << host << ":" << bound << " ("
                  << (db.is_postgresql() ? "PostgreSQL" : "SQLite") << ")" << std::endl;
        server.listen_after_bind();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "idem-payments: " << e.what() << "\n";
        return 1;
    }
}
