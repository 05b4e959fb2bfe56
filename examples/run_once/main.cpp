// Run an operation once: a capture that a retried command must not repeat.
#include <idem/idem.hpp>
#include <idem/memory_store.hpp>

#include <iostream>
#include <memory>
#include <string>

struct receipt {
    std::string capture_id;
    long amount_cents;
};

// readme:begin run-once
// Serialize the result for replays; classify what to keep.
const auto receipt_codec = idem::make_codec<receipt>(
    [](const receipt& r) { return r.capture_id + ":" + std::to_string(r.amount_cents); },
    [](std::string_view bytes) {
        const auto colon = bytes.find(':');
        return receipt{std::string(bytes.substr(0, colon)), std::stol(std::string(bytes.substr(colon + 1)))};
    });

receipt capture_once(idem::executor& exec, const std::string& tenant, const std::string& order_id, long cents) {
    const idem::record_key key("payments.capture", idem::scope::tenant(tenant),
                               idem::keys::derive("capture", {order_id}));
    const std::string fingerprint = std::to_string(cents);  // same key, other amount: key_reused
    auto e = exec.execute(
        key, fingerprint, {.profile = "payments"},
        [&] {
            return receipt{"cap-" + order_id, cents};
        },  // the side effect
        receipt_codec);
    switch (e.status()) {
        case idem::execution_status::executed:
        case idem::execution_status::replayed: return e.value();
        case idem::execution_status::in_flight: throw std::runtime_error("capture in progress; retry later");
        case idem::execution_status::key_reused: throw std::invalid_argument("order captured with another amount");
        case idem::execution_status::expired: throw std::invalid_argument("order captured long ago; receipt gone");
    }
    throw std::logic_error("unreachable");
}
// readme:end run-once

int main() {
    idem::executor_options options;
    options.profiles["payments"] = {.retention = std::chrono::hours(24 * 7)};
    auto metrics = std::make_shared<idem::metrics_sink>();
    idem::executor exec(std::make_shared<idem::memory_store>(), options, metrics);

    const receipt first = capture_once(exec, "acme", "order-17", 1250);
    const receipt retry = capture_once(exec, "acme", "order-17", 1250);
    std::cout << "first: " << first.capture_id << " " << first.amount_cents << "\n"
              << "retry: " << retry.capture_id << " " << retry.amount_cents << " (replayed)\n";
    try {
        (void)capture_once(exec, "acme", "order-17", 9999);
    } catch (const std::invalid_argument& e) {
        std::cout << "other amount: " << e.what() << "\n";
    }
    std::cout << metrics->render_prometheus();
    return first.capture_id == retry.capture_id ? 0 : 1;
}
