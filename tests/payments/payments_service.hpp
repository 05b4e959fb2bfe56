// The payments example as a real service: a child process on a free loopback
// port, on a new SQLite file or (built with IDEM_PAYMENTS_POSTGRESQL or
// IDEM_PAYMENTS_MARIADB) on PostgreSQL or MariaDB.
//
//   payments_service svc;                                   // defaults: 16 threads, no delay
//   payments_service crashing({.db = svc.db, .crash_at = "after_writes"});  // same database
//   svc.open("alice", 1000);
//   auto r = svc.post("/transfers", body, {{"Idempotency-Key", "k1"}});
//   auto d = svc.deliver(svc.deposit_event("evt_1", "alice", 500));  // a signed provider event
#pragma once

#include <doctest/doctest.h>

#include <httplib.h>

#include <sys/wait.h>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "idem/webhook.hpp"
#include "temp_dir.hpp"
#if defined(IDEM_PAYMENTS_POSTGRESQL)
#include <libpq-fe.h>

#include "postgres_server.hpp"
#elif defined(IDEM_PAYMENTS_MARIADB)
#include <soci/mysql/soci-mysql.h>
#include <soci/soci.h>

#include "mariadb_server.hpp"
#else
#include <sqlite3.h>
#endif

namespace idem::test {

struct service_config {
    int processing_delay_ms = 0;
    std::string db = {};                  // empty: a new SQLite file, or the shared server's database
    std::vector<std::string> extra = {};  // more flags
    std::string crash_at = {};            // the step IDEM_PAYMENTS_CRASH_AT names for this process
    int crash_after = 1;                  // IDEM_PAYMENTS_CRASH_AFTER: it dies the n-th time it gets there
};

struct payments_service {
    temp_dir dir{"payments"};
    std::string secret = "whsec-test";
    std::string db;
    std::unique_ptr<child_process> process;
    int port = 0;

    explicit payments_service(service_config config = {}) {
        using namespace std::chrono_literals;
#if defined(IDEM_PAYMENTS_POSTGRESQL)
        db = config.db.empty() ? shared_postgres() : config.db;
#elif defined(IDEM_PAYMENTS_MARIADB)
        db = config.db.empty() ? shared_mariadb() : config.db;
#else
        db = config.db.empty() ? "sqlite:" + (dir.path() / "payments.db").string() : config.db;
#endif
        spawn_options o;
        o.argv = {IDEM_PAYMENTS_BINARY,
                  "--db",
                  db,
                  "--port",
                  "0",
                  "--threads",
                  "16",
                  "--webhook-secret",
                  secret,
                  "--processing-delay",
                  std::to_string(config.processing_delay_ms)};
        o.argv.insert(o.argv.end(), config.extra.begin(), config.extra.end());
        o.pipe_stdout = true;
        // The child inherits the variable; tests start their services one at a time.
        if (!config.crash_at.empty()) {
            ::setenv("IDEM_PAYMENTS_CRASH_AT", config.crash_at.c_str(), 1);
            ::setenv("IDEM_PAYMENTS_CRASH_AFTER", std::to_string(config.crash_after).c_str(), 1);
        }
        process = std::make_unique<child_process>(std::move(o));
        ::unsetenv("IDEM_PAYMENTS_CRASH_AT");
        ::unsetenv("IDEM_PAYMENTS_CRASH_AFTER");
        const auto line = process->read_line(20s);
        REQUIRE(line.has_value());
        const auto colon = line->rfind(':');
        port = std::stoi(line->substr(colon + 1));
        REQUIRE(port > 0);
    }
    ~payments_service() {
        using namespace std::chrono_literals;
        process->signal(SIGTERM);
        // Stopped, it exits 0; a sanitizer that reported exits otherwise (ThreadSanitizer 66).
        // A process the test killed ended by a signal instead.
        if (process->wait_for_exit(5s)) {
            const int status = process->reap();
            if (WIFEXITED(status))
                CHECK_MESSAGE(WEXITSTATUS(status) == 0, "the service exited with " << WEXITSTATUS(status));
        }
    }

    httplib::Client client() const {
        using namespace std::chrono_literals;
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(30s);
        return c;
    }
    httplib::Result post(const std::string& path, const std::string& body, httplib::Headers headers) const {
        headers.emplace("Authorization", "Bearer test-client");
        return client().Post(path, headers, body, "application/json");
    }
    long long balance(const std::string& account) const {
        auto r = client().Get("/accounts/" + account);
        REQUIRE(r);
        REQUIRE(r->status == 200);
        const auto at = r->body.find("\"balance\":");
        return std::stoll(r->body.substr(at + 10));
    }
    void open(const std::string& account, long long cents) const {
        const std::string opening = cents > 0 ? ",\"balance\":" + std::to_string(cents) : "";
        auto r =
            post("/accounts", "{\"id\":\"" + account + "\"" + opening + "}", {{"Idempotency-Key", "open-" + account}});
        REQUIRE(r);
        REQUIRE(r->status == 201);
    }
    std::string transfer_body(const std::string& from, const std::string& to, long long amount) const {
        return "{\"from\":\"" + from + "\",\"to\":\"" + to + "\",\"amount\":" + std::to_string(amount) + "}";
    }
    std::string deposit_event(const std::string& id, const std::string& account, long long amount) const {
        return "{\"id\":\"" + id + "\",\"account\":\"" + account + "\",\"amount\":" + std::to_string(amount) + "}";
    }
    // A provider delivery of `event`, signed as the provider signs (Provider-Signature:
    // t=...,v1=...) with `secrets` (the service's own by default) at `at`.
    httplib::Result deliver(const std::string& event, std::vector<std::string> secrets = {},
                            std::chrono::system_clock::time_point at = std::chrono::system_clock::now()) const {
        if (secrets.empty()) secrets.push_back(secret);
        return client().Post("/webhooks/provider",
                             {{"Provider-Signature", idem::webhook::sign_timestamped(secrets, event, at)}}, event,
                             "application/json");
    }

    // A number the database answers `sql` with (COUNT(*) of something), read on a
    // connection of the test's own.
    long long count(const std::string& sql) const {
#if defined(IDEM_PAYMENTS_POSTGRESQL)
        PGconn* conn = PQconnectdb(db.c_str());
        REQUIRE(PQstatus(conn) == CONNECTION_OK);
        PGresult* r = PQexec(conn, sql.c_str());
        const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        const long long n = ok ? std::stoll(PQgetvalue(r, 0, 0)) : -1;
        PQclear(r);
        PQfinish(conn);
#elif defined(IDEM_PAYMENTS_MARIADB)
        soci::session conn(soci::mysql, mariadb_address::parse(db).soci());
        long long n = -1;
        conn << sql, soci::into(n);
        const bool ok = conn.got_data();
#else
        sqlite3* conn = nullptr;
        REQUIRE(sqlite3_open_v2(db.substr(7).c_str(), &conn, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
        sqlite3_busy_timeout(conn, 5000);
        sqlite3_stmt* st = nullptr;
        const bool ok =
            sqlite3_prepare_v2(conn, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
        const long long n = ok ? sqlite3_column_int64(st, 0) : -1;
        sqlite3_finalize(st);
        sqlite3_close(conn);
#endif
        REQUIRE(ok);
        return n;
    }
    // idem's records of a namespace ("http", "webhook:provider").
    long long records(const std::string& name_space) const {
        return count("SELECT COUNT(*) FROM idem_records WHERE namespace = '" + name_space + "'");
    }
};

}  // namespace idem::test
