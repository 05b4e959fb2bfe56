// idem::contract::run_sql: doctest's runner over the SQL-store scenarios, with
// the store_admin ones excluded for a store that is none. doctest's
// implementation lives in this library, hidden (symbol visibility), so a program
// that uses doctest for its own tests keeps its own.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "idem/store_admin.hpp"
#include "sql_context.hpp"

namespace idem::contract {
namespace {

sql_store_context* running = nullptr;

}  // namespace

sql_store_context& current_sql() {
    if (running == nullptr) throw std::logic_error("idem: a SQL contract scenario ran outside idem::contract::run_sql");
    return *running;
}

sql_store_context::~sql_store_context() = default;

void sql_store_context::advance(duration by) {
    std::this_thread::sleep_for(by);
}

void sql_store_context::clear_records(soci::session& session) {
    session << "DELETE FROM idem_records";
    session << "DELETE FROM idem_tombstones";
}

namespace {

[[noreturn]] void no_refusals(const char* what) {
    throw std::logic_error(std::string("idem: the SQL contract context offers no ") + what +
                           ": override it, and refuses_on_demand() to return true");
}

}  // namespace

void sql_store_context::refuse_completed_records(soci::session&) {
    no_refusals("refuse_completed_records");
}
void sql_store_context::accept_completed_records(soci::session&) {
    no_refusals("accept_completed_records");
}
void sql_store_context::refuse_deleting_records(soci::session&) {
    no_refusals("refuse_deleting_records");
}
void sql_store_context::accept_deleting_records(soci::session&) {
    no_refusals("accept_deleting_records");
}

int run_sql(sql_store_context& context, int argc, char** argv) {
    const auto store = context.make_store();
    doctest::Context runner(argc, argv);
    std::string excluded;
    const auto exclude = [&](const char* suite, const char* why) {
        runner.addFilter("test-suite-exclude", suite);
        excluded += std::string("\n  ") + suite + ": " + why;
    };
    if (dynamic_cast<const store_admin*>(store.get()) == nullptr) exclude("store_admin", "the store is no store_admin");
    if (!context.refuses_on_demand()) exclude("refusals", "the context injects no failures");
    if (!excluded.empty())
        std::printf("idem SQL contract, %s: scenarios left out%s\n", context.name().c_str(), excluded.c_str());
    running = &context;
    const int result = runner.run();
    running = nullptr;
    return result;
}

}  // namespace idem::contract
