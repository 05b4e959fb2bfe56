// The completer: threads that find operations in steps whose lease ended
// before they finished (one short read), take each over (its own transaction:
// the fencing token moves on, so the run before can write no step more) and
// run the registered operation on its stored input, or its compensation once
// compensate_after runs failed. A run that fails is put off by the backoff; a
// completer that dies mid-run loses nothing: the lease it took ends, and the
// operation is due again.
#include "idem/completer.hpp"

#include <soci/soci.h>

#include <atomic>
#include <exception>
#include <map>
#include <optional>
#include <string>

#include "idem/database.hpp"
#include "idem/error.hpp"
#include "internal/exception_text.hpp"
#include "internal/retry_schedule.hpp"
#include "pass_threads.hpp"
#include "sql/operations_table.hpp"

namespace idem {
namespace {

namespace table = detail::operations_table;

std::vector<std::string> problems_of(const completer_options& o) {
    std::vector<std::string> problems;
    if (o.batch < 1 || o.batch > 1000) problems.emplace_back("batch must be between 1 and 1000");
    if (o.threads < 1 || o.threads > 64) problems.emplace_back("threads must be between 1 and 64");
    if (o.idle_wait < std::chrono::milliseconds(1) || o.idle_wait > std::chrono::minutes(1))
        problems.emplace_back("idle_wait must be between 1ms and 1m");
    if (o.first_backoff < std::chrono::milliseconds(0) || o.max_backoff < o.first_backoff ||
        o.max_backoff > std::chrono::hours(24))
        problems.emplace_back("first_backoff must be at least 0 and at most max_backoff, max_backoff at most 24h");
    if (o.report_every < std::chrono::milliseconds(0)) problems.emplace_back("report_every must not be negative");
    return problems;
}

// What a run's failure says, and whether it counts toward compensate_after: a
// database that failed transiently (a lost connection, a lock timeout) is no
// failure of the operation's.
struct run_failure {
    std::string what;
    bool counted = true;
};

run_failure failure_of(const std::exception_ptr& failure) {
    try {
        std::rethrow_exception(failure);
    } catch (const error& e) {
        return {e.what(), !e.is_transient() && !e.is_connection_lost()};
    } catch (...) {
        return {detail::what_of(failure)};
    }
}

}  // namespace

struct IDEM_LOCAL completer::impl {
    database& db;
    std::map<std::string, const any_operation*, std::less<>> operations;  // by namespace
    std::vector<std::string> namespaces;
    completer_options options;
    detail::retry_schedule backoff;

    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> compensated{0};
    std::atomic<std::uint64_t> failed{0};
    detail::pass_threads threads;

    impl(database& d, std::map<std::string, const any_operation*, std::less<>> ops, completer_options o)
        : db(d),
          operations(std::move(ops)),
          options(std::move(o)),
          backoff{.first = options.first_backoff, .ceiling = options.max_backoff},
          threads([this] { return run_once(); }, [this] { options.telemetry->on_completer(metrics()); },
                  {.threads = options.threads,
                   .idle_wait = options.idle_wait,
                   .report_every = options.report_every,
                   .failure_event = "idem.completer.pass_failed",
                   .report_failure_event = "idem.completer.report_failed",
                   .telemetry = options.telemetry}) {
        if (!options.telemetry) options.telemetry = null_sink();
        for (const auto& [name, op] : operations) namespaces.push_back(name);
    }

    void log(log_level level, std::string_view event, const std::string& record_id, const std::string& message,
             const std::string& name_space) const {
        options.telemetry->on_log({.level = level,
                                   .name = event,
                                   .key_hash = std::string_view(record_id).substr(0, 16),
                                   .message = message,
                                   .operation = {.name_space = name_space}});
    }

    // Takes the operation over and runs it. Whatever fails is this operation's
    // alone: it is put off by the backoff and the pass goes on with the next.
    void finish_one(const table::due_row& due) {
        const any_operation& operation = *operations.at(due.name_space);
        const auto wait =
            std::chrono::duration_cast<std::chrono::milliseconds>(detail::backoff_after(backoff, due.failures + 1));
        std::optional<steps> op;
        try {
            op.emplace(db.take_over(due.record_id, due.name_space, operation.policy_, options.execution));
        } catch (...) {
            // A row it cannot take over (its stored input is not what idem writes, say).
            ++failed;
            const run_failure f = failure_of(std::current_exception());
            try {
                db.transact([&](unit_of_work& uow) {
                    table::put_off(uow.sql(), due.record_id, std::nullopt, wait.count(), f.what, f.counted);
                });
            } catch (...) {
                // The database failed: the operation stays due, and so does the rest of the batch.
            }
            log(log_level::warning, "idem.completer.takeover_failed", due.record_id,
                "taking the operation over failed: " + f.what + "; again in " + std::to_string(wait.count()) + "ms",
                due.name_space);
            return;
        }
        if (op->decision() != execution_status::executed) return;  // finished or taken meanwhile
        if (op->note() == detail::takeover_note::compensation_begins)
            log(log_level::warning, "idem.completer.compensating", due.record_id,
                "the operation failed " + std::to_string(due.failures) +
                    " runs of the completer: it runs its compensation",
                due.name_space);
        if (op->note() == detail::takeover_note::compensation_resumes)
            log(log_level::warning, "idem.completer.compensating", due.record_id,
                "the operation is marked to compensate (by idem complete --compensate, or a compensation that "
                "failed): it runs its compensation",
                due.name_space);
        if (op->note() == detail::takeover_note::no_compensation)
            log(log_level::warning, "idem.completer.no_compensation", due.record_id,
                "the operation was marked to compensate, and namespace " + due.name_space +
                    " registers no compensation: the mark is dropped, and it runs forward",
                due.name_space);
        try {
            operation.complete(*op);
            ++(op->compensating() ? compensated : completed);
        } catch (const lease_lost& e) {
            // Another run took it over (this run outlived its lease): that run finishes it.
            ++failed;
            log(log_level::warning, "idem.completer.lease_lost", due.record_id, e.what(), due.name_space);
        } catch (...) {
            ++failed;
            const run_failure f = failure_of(std::current_exception());
            op->fail(f.what, wait, f.counted);
            log(log_level::warning, "idem.completer.run_failed", due.record_id,
                f.what + (f.counted ? " (failed run " + std::to_string(due.failures + 1) : " (not counted: transient") +
                    "; again in " + std::to_string(wait.count()) + "ms)",
                due.name_space);
        }
    }

    std::size_t run_once() {
        // Reads of prepared statements run in a transaction, so that behind a
        // pooler in transaction mode each statement is prepared, run and
        // deallocated on one server connection.
        const std::vector<table::due_row> due =
            db.transact([&](unit_of_work& uow) { return table::due(uow.sql(), namespaces, options.batch); });
        for (const table::due_row& d : due) finish_one(d);
        return due.size();
    }

    completer_metrics metrics() {
        const table::backlog b = db.read([](soci::session& sql) { return table::count_unfinished(sql); });
        return {.unfinished = static_cast<std::uint64_t>(b.unfinished),
                .overdue = static_cast<std::uint64_t>(b.overdue),
                .completed = completed.load(),
                .compensated = compensated.load(),
                .failed = failed.load(),
                .lag = std::chrono::milliseconds(b.lag_ms)};
    }
};

completer::completer(database& db, std::vector<std::reference_wrapper<const any_operation>> operations,
                     completer_options options) {
    std::vector<std::string> problems = problems_of(options);
    std::map<std::string, const any_operation*, std::less<>> by_namespace;
    if (operations.empty()) problems.emplace_back("operations must name at least one operation");
    for (const any_operation& op : operations)
        if (!by_namespace.emplace(op.name_space(), &op).second)
            problems.push_back("operations registers namespace " + op.name_space() + " twice");
    if (!problems.empty()) throw options_error(std::move(problems));
    impl_ = std::make_unique<impl>(db, std::move(by_namespace), std::move(options));
}

completer::~completer() {
    stop();
}

void completer::start() {
    impl_->threads.start();
}

void completer::stop() {
    impl_->threads.stop();
}

bool completer::running() const {
    return impl_->threads.running();
}

std::size_t completer::run_once() {
    return impl_->run_once();
}

completer_metrics completer::metrics() {
    return impl_->metrics();
}

}  // namespace idem
