// The read-modify-write race a balance invites, run for real: many threads
// moving money between a few accounts through mapped objects (read the
// balances, compute, write them back), on SQLite and PostgreSQL, with a
// version column and without one (read FOR UPDATE on PostgreSQL). Every
// transfer is a db.once of its own key, retried by the caller until it is
// answered, so each runs exactly once; each account must then hold exactly its
// opening balance plus what the transfer rows say came in and went out.
//
// With the version checks and the row locks switched off (a test-only switch),
// the same race loses updates on PostgreSQL: that test shows the first one can
// fail. SQLite serialises writers (BEGIN IMMEDIATE), so there it loses none
// either way.
#include <doctest/doctest.h>

#include <soci/soci.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bank_places.hpp"
#include "idem/database.hpp"
#include "mapped_bank.hpp"
#include "sql/tracked_objects.hpp"

namespace bank {

// The same money in a table of its own, without a version column.
struct plain_account {
    std::string id;
    long long balance = 0;
};

}  // namespace bank

template <>
struct idem::mapping<bank::plain_account> {
    static constexpr auto table = "plain_accounts";
    static constexpr auto columns = idem::columns(idem::key("id", &bank::plain_account::id),
                                                  idem::column("balance", &bank::plain_account::balance));
};

namespace {

using namespace std::chrono_literals;
using namespace idem::test;

constexpr int accounts = 4;
constexpr long long opening = 1000;

std::string account_id(int i) {
    return "acct-" + std::to_string(i);
}

struct race_result {
    int executed = 0;
    long long transfer_rows = 0;
    long long total = 0;
    int accounts_off = 0;  // accounts whose balance is not opening + in - out
};

// `threads` x `each` transfers of Account (plain_account or versioned_account)
// between `accounts` accounts, each read, computed and written back through the
// mapping, with a pause between the read and the write so that races happen.
template <class Account>
race_result race(const place& where, int threads, int each) {
    idem::database db = open_bank(where, {.pool_size = static_cast<std::size_t>(threads), .attempts = 20});
    db.create_table<Account>();
    db.transact([](idem::unit_of_work& uow) {
        for (int i = 0; i < accounts; ++i) {
            Account a;
            a.id = account_id(i);
            a.balance = opening;
            uow.add(a);
        }
    });
    std::atomic<int> executed{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            std::mt19937 random(static_cast<unsigned>(t) * 7919U + 1U);
            for (int n = 0; n < each; ++n) {
                int from = static_cast<int>(random() % accounts), to = static_cast<int>(random() % (accounts - 1));
                if (to >= from) ++to;
                const long long amount = 1 + static_cast<long long>(random() % 9);
                const std::string id = "t-" + std::to_string(t) + "-" + std::to_string(n);
                auto work = [&](idem::unit_of_work& uow) {
                    // Loaded in id order, so that row locks (FOR UPDATE) are taken in one order.
                    const std::string low = account_id(std::min(from, to)), high = account_id(std::max(from, to));
                    Account& first = uow.get<Account>(low);
                    Account& second = uow.get<Account>(high);
                    Account& source = from < to ? first : second;
                    Account& target = from < to ? second : first;
                    const long long source_balance = source.balance, target_balance = target.balance;
                    std::this_thread::sleep_for(200us);  // what a concurrent writer needs to slip in
                    source.balance = source_balance - amount;
                    target.balance = target_balance + amount;
                    return uow.add(bank::transfer{id, account_id(from), account_id(to), amount});
                };
                // The caller's retry: the same key until an answer (a retry that finds it done replays).
                for (int attempt = 0;; ++attempt) {
                    try {
                        auto e = db.once(key_of(id), "fp", work);
                        if (e.status() == idem::execution_status::executed) ++executed;
                        break;
                    } catch (const idem::error& e) {
                        if (!e.is_transient() || attempt == 100) throw;
                    }
                }
            }
        });
    for (auto& t : pool) t.join();

    race_result r;
    r.executed = executed;
    r.transfer_rows = count_rows(db, "SELECT COUNT(*) FROM transfers");
    std::map<std::string, long long> expected;
    db.read([&](soci::session& sql) {
        soci::rowset<soci::row> rows = (sql.prepare << "SELECT from_account, to_account, amount FROM transfers");
        for (const soci::row& row : rows) {
            const long long amount = row.get<long long>(2);
            expected[row.get<std::string>(0)] -= amount;
            expected[row.get<std::string>(1)] += amount;
        }
    });
    db.transact([&](idem::unit_of_work& uow) {
        for (int i = 0; i < accounts; ++i) {
            const Account& a = uow.get<Account>(account_id(i));
            r.total += a.balance;
            if (a.balance != opening + expected[a.id]) ++r.accounts_off;
        }
    });
    return r;
}

template <class Account>
void check_exact(const place& where, int threads, int each) {
    const race_result r = race<Account>(where, threads, each);
    CHECK(r.executed == threads * each);       // every transfer ran once
    CHECK(r.transfer_rows == threads * each);  // and wrote its row once
    CHECK(r.total == accounts * opening);      // no money made or lost
    CHECK(r.accounts_off == 0);                // no update lost
}

// Switches the checks off for one test, and on again however it ends.
struct unchecked {
    unchecked() { idem::detail::set_concurrency_checks(false); }
    ~unchecked() { idem::detail::set_concurrency_checks(true); }
    unchecked(const unchecked&) = delete;
    unchecked& operator=(const unchecked&) = delete;
};

}  // namespace

TEST_CASE("lost updates: threads moving money through mapped objects lose none, with or without versions") {
    for (const auto& where : places()) {
        CAPTURE(where->url());
        const int threads = 8, each = where->server() ? 40 : 25;
        SUBCASE("a version column: WHERE version = the one read") {
            check_exact<bank::versioned_account>(*where, threads, each);
        }
        SUBCASE("no version column: read FOR UPDATE on PostgreSQL") {
            check_exact<bank::plain_account>(*where, threads, each);
        }
    }
}

TEST_CASE("lost updates: with versions and row locks switched off, the same race loses updates on PostgreSQL") {
    // Each race on a database of its own, as the transfers of both use the same keys.
    const auto lost = [](const place& where, const race_result& r) {
        CHECK(r.executed == 8 * 20);
        if (where.server()) {
            // Read, compute, write back under READ COMMITTED: concurrent writers overwrite each other.
            CHECK(r.accounts_off > 0);
        } else {
            // One writer at a time: the read and the write cannot interleave with another's.
            CHECK(r.accounts_off == 0);
        }
    };
    for (const auto& where : places()) {
        CAPTURE(where->url());
        const unchecked off;
        SUBCASE("a version column, not checked") {
            lost(*where, race<bank::versioned_account>(*where, 8, 20));
        }
        SUBCASE("no version column, read without FOR UPDATE") {
            lost(*where, race<bank::plain_account>(*where, 8, 20));
        }
    }
}
