// idem/http/httplib.hpp: the Idempotency-Key layer on a cpp-httplib server.
//
//   idem::http::idempotency_layer layer{store, {.resolver = idem::scopes::user()}};
//   server.Post("/payments", idem::http::idempotent(layer, [&](const httplib::Request& req,
//                                                            httplib::Response& res) {
//       res.set_content(create_payment(req.body), "application/json");
//   }, {.claims_of = [](const httplib::Request& req) { return verify_token(req); }, .route = "/payments"}));
//   idem::http::protect(server, telemetry);  // 500 as problem+json, NUL headers rejected
//   server.listen_after_bind() after idem::http::bind_with_backlog(server, "0.0.0.0", 8080);
//
// Link idem_httplib (pkg-config idem-httplib). `layer` must outlive the server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "idem/export.hpp"
#include "idem/http/layer.hpp"
#include "idem/telemetry.hpp"

namespace httplib {
struct Request;
struct Response;
class Server;
}  // namespace httplib

namespace idem::http {

// Same type as httplib::Server::Handler.
using httplib_handler = std::function<void(const httplib::Request&, httplib::Response&)>;

struct IDEM_API httplib_options {
    // The caller's claims, from whatever authenticated the request; none by default.
    std::function<claims(const httplib::Request&)> claims_of = nullptr;
    // The route template log events name the endpoint by ("/accounts/{id}"); empty: the path.
    std::string route = {};
};

// Wraps `handler` so each keyed request runs it at most once. A response with a
// content provider (streamed) is sent but not stored, and its key released. A
// multipart body (which cpp-httplib parses into parts and leaves out of req.body) is
// fingerprinted part by part. A header value holding NUL is answered 400
// Request.HeaderInvalid in every mode, before anything runs.
[[nodiscard]] IDEM_API httplib_handler idempotent(idempotency_layer& layer, httplib_handler handler,
                                                  httplib_options options = {});

// Makes `server` safe for hostile input; takes its exception and pre-routing handlers:
// - an exception from any handler is answered 500 problem+json (Server.InternalError)
//   with a correlation id (body and X-Correlation-Id); the exception text goes to
//   `telemetry` only (event idem.http.exception, with the correlation id), never to the
//   client (cpp-httplib's default sends it in an EXCEPTION_WHAT header);
// - a request with a header value holding NUL is answered 400 Request.HeaderInvalid.
IDEM_API void protect(httplib::Server& server, std::shared_ptr<telemetry_sink> telemetry = nullptr);

// Binds `server` to host:port (port 0: a free one) with room for `backlog` connections
// waiting to be accepted, and returns the port; then call server.listen_after_bind().
// Debian's cpp-httplib is a compiled library whose backlog is fixed at 5, so a burst
// of connections otherwise waits out SYN retransmits (seconds each). The kernel caps
// `backlog` at net.core.somaxconn. Throws std::system_error when it cannot bind.
[[nodiscard]] IDEM_API int bind_with_backlog(httplib::Server& server, const std::string& host, int port,
                                             int backlog = 1024);

}  // namespace idem::http
