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
};

class service {
public:
    // The mode and everything else the layer reads per request come from db's executor's options source.
    service(idem::database& db, service_options options);
    void mount(httplib::Server& server);

private:
    idem::database& db_;
    service_options options_;
    idem::http::idempotency_layer layer_;  // the Idempotency-Key contract in front of the endpoints
};

}  // namespace payments
