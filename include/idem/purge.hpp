// idem/purge.hpp: the purge job: delete expired records in bounded batches.
//
// Each batch is its own short transaction, and the job rests between batches
// as long as the last one took, so writers waiting for the lock get it:
//
//   auto r = idem::purge(db.admin(), {.batch = 1000, .older_than = std::chrono::hours(1),
//                                     .progress = [](const idem::purge_progress& p) { log(p.deleted); }});
//   log(r.deleted, r.batches, r.stopped_at_max_rows);
//
// The `idem purge` command, the stores' purge_expired and applications all run this loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>

#include "idem/clock.hpp"
#include "idem/export.hpp"
#include "idem/store_admin.hpp"

namespace idem {

struct purge_progress {
    std::size_t deleted = 0;
    std::size_t batches = 0;
    std::chrono::steady_clock::duration elapsed = {};
};

struct purge_options {
    std::size_t batch = 1000;                                       // rows per transaction
    std::optional<std::size_t> max_rows = {};                       // stop after this many; no bound when empty
    duration older_than = duration::zero();                         // only rows expired at least this long ago
    bool rest_between_batches = true;                               // as long as the last batch took, 1 ms to 100 ms
    std::function<void(const purge_progress&)> progress = nullptr;  // after every batch
};

struct purge_result {
    std::size_t deleted = 0;
    std::size_t batches = 0;
    std::chrono::steady_clock::duration elapsed = {};
    bool stopped_at_max_rows = false;  // rows may be left; a later run takes them
};

// Runs until a batch finds fewer rows than it asked for (rows expiring meanwhile
// wait for the next run) or max_rows were deleted. std::invalid_argument for a
// zero batch or max_rows, or a negative older_than; store_error from the store.
IDEM_API purge_result purge(store_admin& store, const purge_options& options = {});

// The same loop over any table: delete_batch(limit, older_than) deletes up to
// `limit` rows in one short transaction and returns how many (the outbox's
// delivered messages: idem/outbox_relay.hpp).
IDEM_API purge_result purge_batches(const std::function<std::size_t(std::size_t, duration)>& delete_batch,
                                    const purge_options& options = {});

}  // namespace idem
