// The business sessions of an idem::database: SOCI sessions, each with its
// transaction runner, lent one caller at a time by the library's one pool
// (internal/lending_pool.hpp). A session is opened by its first use inside a
// unit of work, so a database that cannot be reached fails there, as a store
// error the unit of work's retry understands; connection_lost() (the pool's
// invalidate()) has every session opened so far opened anew before its next use.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include <soci/session.h>

#include "idem/transaction_runner.hpp"
#include "internal/lending_pool.hpp"

namespace idem::detail {

struct business_session {
    soci::session sql;
    std::unique_ptr<transaction_runner> runner;  // null until opened; declared after the session: dies first
};

using session_pool = lending_pool<business_session>;

// A pool of up to `size` sessions; a caller waits at most `acquire_timeout` for one.
[[nodiscard]] std::unique_ptr<session_pool> make_session_pool(std::size_t size,
                                                              std::chrono::milliseconds acquire_timeout);

// The runner of an open session: opens `s` with `open` first when it is not.
// store_error when the database cannot be reached.
[[nodiscard]] transaction_runner& ready(business_session& s, const std::function<void(soci::session&)>& open,
                                        const transaction_options& options);

}  // namespace idem::detail
