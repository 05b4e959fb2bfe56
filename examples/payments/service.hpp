// The payments service: accounts, idempotent transfers and a signed provider
// webhook, over HTTP (cpp-httplib), on one idem::database.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <idem/database.hpp>
#include <idem/http/layer.hpp>

namespace httplib {
class Server;
}

namespace payments {

struct service_options {
    std::string webhook_secret;
    // Simulates a slow fraud check before each transfer, to make concurrent retries visible (409).
    std::chrono::milliseconds processing_delay{0};
    idem::mode mode = idem::mode::enforce;
    // How long a transfer holds its key when the process dies before settling it.
    std::chrono::seconds lease{60};
};

class service {
public:
    service(idem::database& db, service_options options, std::shared_ptr<idem::telemetry_sink> telemetry);
    void mount(httplib::Server& server);

private:
    idem::database& db_;
    service_options options_;
    std::shared_ptr<idem::telemetry_sink> telemetry_;
    idem::http::idempotency_layer layer_;  // the Idempotency-Key contract in front of the endpoints
};

}  // namespace payments
