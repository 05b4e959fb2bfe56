// idem/reseal.hpp: every stored result sealed under the newest key, in batches.
//
// A key rotation (idem/encryption.hpp) seals new results under the new key at
// once; what older keys sealed stays sealed under them until it expires. To
// retire an old key sooner (it leaked, or policy says so), reseal the store:
// each completed record's payload is opened with the ring and sealed again
// under its first key, a batch per short transaction, while the services run.
// A payload stored before encryption was on is sealed too.
//
//   const idem::encryption_keys keys = idem::encryption_keys::from_file("/etc/payments/keys");  // k2, then k1
//   const idem::reseal_result r = idem::reseal(db.admin(), keys, {.batch = 500});
//   log(r.read, r.resealed);  // nothing is sealed under k1 any more: k1 can leave the ring
//
// Every service must have the new ring (the new key first) before the reseal
// starts: a service still sealing under the old key writes what the reseal
// must then read again. A payload no key of the ring opens stops the reseal
// with payload_unreadable naming its record's key hash; the batch it was in is
// left as it was, and the batches before it stay resealed (a second run
// carries on, reading them once more and rewriting nothing). `idem reseal`
// runs this loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "idem/encryption.hpp"
#include "idem/export.hpp"
#include "idem/store_admin.hpp"

namespace idem {

struct reseal_result {
    std::size_t read = 0;      // completed records read
    std::size_t resealed = 0;  // whose payload was sealed again under the newest key
    std::size_t batches = 0;
    std::chrono::steady_clock::duration elapsed = {};
};

struct reseal_options {
    std::size_t batch = 500;                                       // records per transaction
    bool rest_between_batches = true;                              // as long as the last batch took, 1 ms to 100 ms
    std::function<void(const reseal_result&)> progress = nullptr;  // after every batch
};

// std::invalid_argument for a zero batch; payload_unreadable as above; the store's errors as they come.
IDEM_API reseal_result reseal(store_admin& store, const encryption_keys& keys, const reseal_options& options = {});

}  // namespace idem
