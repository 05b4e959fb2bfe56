// The payments service: accounts, idempotent transfers, a signed provider
// webhook and payouts, over HTTP (cpp-httplib), on one idem::database. Every
// write route but payouts runs in a unit of work that also holds its
// idempotency record: one record and one transaction per request. A payout
// calls the provider between its transactions: it is an operation in steps.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <idem/database.hpp>
#include <idem/http/layer.hpp>
#include <idem/webhook.hpp>

#include "payouts.hpp"

namespace httplib {
class Server;
}

namespace payments {

struct service_options {
    // The provider's signing secrets: any one verifies (rotation: add the new one, then drop the old).
    std::vector<std::string> webhook_secrets;
    // Simulates a slow fraud check inside each transfer, to make concurrent retries visible.
    std::chrono::milliseconds processing_delay{0};
    // The payout provider's base URL (http://host:port); empty: POST /payouts answers 503.
    std::string provider_url;
};

class service {
public:
    // The mode and everything else the layer reads per request come from db's executor's options source.
    service(idem::database& db, service_options options);
    void mount(httplib::Server& server);
    // The operations in steps a completer finishes for this service (payouts).
    [[nodiscard]] const idem::any_operation& payouts() const noexcept { return payouts_; }

private:
    idem::database& db_;
    service_options options_;
    idem::http::idempotency_layer layer_;  // the Idempotency-Key contract in front of the write routes
    idem::webhook::receiver provider_;     // signed provider events, each applied once
    provider_client payout_provider_;
    idem::operation<idem::http::response> payouts_;  // hold, send to the provider, settle
};

}  // namespace payments
