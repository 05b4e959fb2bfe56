// Where the payments service keeps its money and its idempotency records: one
// database (SQLite file or PostgreSQL), shared by both, so they commit together.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <idem/transaction_runner.hpp>
#include <idem/transactional_record_store.hpp>
#include <soci/soci.h>

namespace payments {

// A business connection and the runner that opens transactions on it.
struct connection {
    soci::session session;
    std::unique_ptr<idem::transaction_runner> runner;
};

class database {
public:
    // `url`: sqlite:PATH, a path ending in .db, or postgresql://... (when built with PostgreSQL).
    static database open(const std::string& url, std::size_t connections);

    [[nodiscard]] const std::shared_ptr<idem::transactional_record_store>& store() const { return store_; }
    [[nodiscard]] bool is_postgresql() const { return postgresql_; }

    // Borrows a connection for the length of `work(connection&)`; waits when all are busy.
    template <class Work>
    auto with_connection(Work&& work) {
        connection& c = acquire();
        struct giver {
            database* db;
            connection* c;
            ~giver() { db->give_back(*c); }
        } guard{this, &c};
        return work(c);
    }

private:
    connection& acquire();
    void give_back(connection& c);

    std::shared_ptr<idem::transactional_record_store> store_;
    bool postgresql_ = false;
    std::vector<std::unique_ptr<connection>> connections_;
    std::vector<connection*> idle_;
    std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
    std::unique_ptr<std::condition_variable> available_ = std::make_unique<std::condition_variable>();
};

}  // namespace payments
