// `idem relay` delivers the outbox to an idem webhook receiver over HTTP;
// `idem outbox status|dead|requeue` show and re-queue what it could not.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "database_arg.hpp"
#include "duration_arg.hpp"
#include "idem/database.hpp"
#include "idem/http/webhook_sink.hpp"
#include "idem/outbox_relay.hpp"
#include "outbox_commands.hpp"

namespace idem::cli {
namespace {

struct relay_args {
    std::string url;
    std::string to;
    std::vector<std::string> secrets;
    std::int64_t batch = 100;
    std::int64_t threads = 1;
    std::int64_t max_attempts = 10;
    std::string lease = "30s";
    std::string first_backoff = "1s";
    std::string max_backoff = "5m";
    std::string timeout = "10s";
    bool drain = false;
};

idem::database open_database(const std::string& url) {
    const database_url parsed = parse_database_url(url);
    // A missing SQLite file is an error here, not a new empty outbox.
    (void)on_database(parsed, [&] { return open_store(parsed, open_mode::existing); });
    return on_database(parsed, [&] { return idem::database::open(url, {.pool_size = 8}); });
}

// A stored text on one line, escaped as in a C string: a backslash before each
// backslash and double quote; newline, carriage return and tab as \n, \r, \t;
// any other control byte as \xHH. Other bytes (UTF-8 too) stay as they are, so
// a dead letter is one line whatever its receiver answered.
std::string escaped(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '"': out += "\\\""; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
                    out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
                else
                    out += c;
        }
    }
    return out;
}

// Messages found under a taken id are named only when there were some (each is also a log line on stderr).
std::string figures(const outbox_metrics& m) {
    std::string out = fmt::format("delivered {}, failed {}, pending {}, dead {}, lag {:.1f}s", m.delivered, m.failed,
                                  m.pending, m.dead, std::chrono::duration<double>(m.lag).count());
    if (m.duplicates + m.conflicts > 0)
        out += fmt::format(", duplicates {}, id conflicts {}", m.duplicates, m.conflicts);
    return out;
}

void relay(const relay_args& args) {
    const auto millis = [](const std::string& text, std::string_view flag) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(parse_duration(text, flag));
    };
    // Every flag is checked before the database is opened.
    const auto lease = millis(args.lease, "--lease"), first_backoff = millis(args.first_backoff, "--first-backoff"),
               max_backoff = millis(args.max_backoff, "--max-backoff"), timeout = millis(args.timeout, "--timeout");
    if (timeout <= std::chrono::milliseconds::zero())
        throw std::invalid_argument("idem: --timeout must be at least 1ms");
    idem::database db = open_database(args.url);
    auto sink = std::make_shared<http::webhook_sink>(
        http::webhook_sink_options{.url = args.to, .secrets = args.secrets, .timeout = timeout});
    auto logs = std::make_shared<log_sink>(std::cerr, log_level::warning);
    outbox_relay relay(db, sink,
                       {.batch = static_cast<std::size_t>(args.batch),
                        .threads = static_cast<int>(args.threads),
                        .lease = lease,
                        .max_attempts = static_cast<int>(args.max_attempts),
                        .first_backoff = first_backoff,
                        .max_backoff = max_backoff,
                        .telemetry = logs});
    if (args.drain) {
        // Until nothing is due: what is backing off waits for a later run.
        while (on_database(database_url::parse(args.url), [&] { return relay.run_once(); }) > 0) {
        }
        std::cout << figures(relay.metrics()) << '\n';
        return;
    }
    // The relay's threads inherit the blocked signals; this thread waits for one.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    relay.start();
    std::cerr << "relaying to " << args.to << "; SIGTERM or Ctrl-C stops after the batch under way\n";
    int received = 0;
    sigwait(&stop_signals, &received);
    relay.stop();
    std::cout << figures(relay.metrics()) << '\n';
}

void add_relay_command(CLI::App& app) {
    auto args = std::make_shared<relay_args>();
    auto* command = app.add_subcommand(
        "relay", "Deliver the outbox's messages to an idem webhook receiver: signed POSTs, retries, dead letters");
    add_database_option(*command, args->url);
    command->add_option("--to", args->to, "The receiver's URL, http://host[:port]/path")->required();
    command->add_option("--secret", args->secrets, "A signing secret; twice while rotating (new, then old)")
        ->required();
    command->add_option("--batch", args->batch, "Messages per claim (default 100)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10000}));
    command->add_option("--threads", args->threads, "Delivering threads (default 1)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{64}));
    command->add_option("--max-attempts", args->max_attempts, "Attempts before a message is dead (default 10)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}));
    command->add_option("--lease", args->lease,
                        fmt::format("How long a claim holds its messages: {} (default 30s)", duration_forms));
    command->add_option(
        "--first-backoff", args->first_backoff,
        fmt::format("The wait after a failed delivery, doubled per attempt: {} (default 1s)", duration_forms));
    command->add_option("--max-backoff", args->max_backoff,
                        fmt::format("The longest wait between attempts: {} (default 5m)", duration_forms));
    command->add_option("--timeout", args->timeout,
                        fmt::format("How long a delivery waits for the receiver (to take the request, to answer) "
                                    "before it counts as failed and is delivered again later: {} (default 10s)",
                                    duration_forms));
    command->add_flag("--drain", args->drain, "Deliver what is due, then exit (instead of running until stopped)");
    command->callback([args] { relay(*args); });
}

void add_status_commands(CLI::App& app) {
    auto* outbox = app.add_subcommand("outbox", "The outbox's figures and dead letters");
    outbox->require_subcommand(1);

    auto status_url = std::make_shared<std::string>();
    auto* status = outbox->add_subcommand("status", "Pending and dead messages, and the age of the oldest pending");
    add_database_option(*status, *status_url);
    status->callback([status_url] {
        idem::database db = open_database(*status_url);
        const outbox_metrics m = on_database(parse_database_url(*status_url), [&] { return outbox_backlog(db); });
        std::cout << fmt::format("pending {}, dead {}, lag {:.1f}s\n", m.pending, m.dead,
                                 std::chrono::duration<double>(m.lag).count());
    });

    auto dead_url = std::make_shared<std::string>();
    auto dead_limit = std::make_shared<std::int64_t>(100);
    auto* dead = outbox->add_subcommand("dead", "List dead letters, oldest first: id, topic, attempts, last answer");
    add_database_option(*dead, *dead_url);
    dead->add_option("--limit", *dead_limit, "At most this many (default 100)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{10000}));
    dead->callback([dead_url, dead_limit] {
        idem::database db = open_database(*dead_url);
        const auto letters = on_database(parse_database_url(*dead_url),
                                         [&] { return dead_letters(db, static_cast<std::size_t>(*dead_limit)); });
        for (const dead_letter& d : letters)
            std::cout << fmt::format("{} {} attempts={} answer=\"{}\"\n", d.id, escaped(d.topic), d.attempts,
                                     escaped(d.last_answer));
        if (letters.empty()) std::cout << "no dead letters\n";
    });

    auto requeue_url = std::make_shared<std::string>();
    auto requeue_id = std::make_shared<std::string>();
    auto* requeue = outbox->add_subcommand("requeue", "Put dead letters back to pending, their attempts reset");
    add_database_option(*requeue, *requeue_url);
    requeue->add_option("--id", *requeue_id, "Only this message (default: every dead letter)");
    requeue->callback([requeue_url, requeue_id] {
        idem::database db = open_database(*requeue_url);
        const std::size_t n = on_database(parse_database_url(*requeue_url), [&] {
            return requeue_dead_letters(db, requeue_id->empty() ? std::nullopt : std::optional(*requeue_id));
        });
        std::cout << fmt::format("requeued {} dead letter{}\n", n, n == 1 ? "" : "s");
    });
}

}  // namespace

void add_outbox_commands(CLI::App& app) {
    add_relay_command(app);
    add_status_commands(app);
}

}  // namespace idem::cli
