// Reserve, complete and replay one key on the in-memory store.
#include <chrono>
#include <iostream>

#include "idem/memory_store.hpp"

int main() {
    using namespace std::chrono_literals;
    idem::memory_store store;
    const idem::record_key key("payments.capture", idem::scope::tenant("acme"), "order-17");

    auto first = store.try_reserve(key, "amount=100", 1min);
    std::cout << "first call:  " << idem::to_string(first.status) << " (key hash " << key.key_hash() << ")\n";
    (void)store.complete(key, first.token, "amount=100", "receipt #1", 24h);

    auto retry = store.try_reserve(key, "amount=100", 1min);
    std::cout << "retry:       " << idem::to_string(retry.status) << ", replays \"" << retry.payload << "\"\n";

    auto reused = store.try_reserve(key, "amount=999", 1min);
    std::cout << "other body:  " << idem::to_string(reused.status) << "\n";
    return 0;
}
