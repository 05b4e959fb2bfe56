// idem/http/httplib.hpp: the Idempotency-Key layer on a cpp-httplib server
// (link idem_httplib; `layer` and `db` must outlive the server).
//
//   idem::http::idempotency_layer layer{db.executor(), {.resolver = idem::scopes::client()}};
//   server.Post("/payments", idem::http::idempotent(layer, db,
//       [&](idem::unit_of_work& uow, const httplib::Request& req, httplib::Response& res) {
//           res.status = 201;
//           res.set_content(create_payment(uow, req.body), "application/json");
//       }, {.claims_of = [](const httplib::Request& req) { return verify_token(req); }, .route = "/payments"}));
//   idem::http::protect(server, telemetry);  // 500 as problem+json, NUL headers rejected
//   idem::http::bind_with_backlog(server, "0.0.0.0", 8080);  // TCP_NODELAY on, room for bursts
//   server.listen_after_bind();
//
// Lease mode (idempotent(layer, handler)), the reconciliation route
// (serve_reconciliation) and the adapter's options: docs/http.md.
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

// The database form's handler: the unit of work, then cpp-httplib's request and response.
using httplib_unit_handler = std::function<void(unit_of_work&, const httplib::Request&, httplib::Response&)>;

namespace detail {
// How the adapter hands a request to the layer: a unit of work on the endpoint's
// side when `uow` is set, none in lease mode.
using httplib_endpoint = std::function<void(unit_of_work* uow, const httplib::Request&, httplib::Response&)>;
using layer_call = std::function<response(idempotency_layer&, const request&, const resolved_options&,
                                          idem::detail::function_ref<response(unit_of_work*)> endpoint)>;
[[nodiscard]] IDEM_API httplib_handler adapt(idempotency_layer& layer, layer_call call, httplib_endpoint endpoint,
                                             httplib_options options);
}  // namespace detail

// Wraps `handler` so each keyed request runs it at most once, in a unit of work of
// `db` that also records its response (see idempotency_layer::handle(db, ...)). A
// multipart body (which cpp-httplib parses into parts and leaves out of req.body) is
// fingerprinted part by part. A header value holding NUL is answered 400
// Request.HeaderInvalid in every mode, before anything runs.
[[nodiscard]] inline httplib_handler idempotent(idempotency_layer& layer, database& db, httplib_unit_handler handler,
                                                httplib_options options = {}) {
    return detail::adapt(
        layer,
        [&db](idempotency_layer& l, const request& req, const resolved_options& live,
              idem::detail::function_ref<response(unit_of_work*)> endpoint) {
            return l.handle(db, req, live, [&](unit_of_work& uow) { return endpoint(&uow); });
        },
        [handler = std::move(handler)](unit_of_work* uow, const httplib::Request& req, httplib::Response& res) {
            handler(*uow, req, res);
        },
        std::move(options));
}

// An endpoint in steps: each request runs `operation` (idem/operation.hpp, with
// the layer's operation_codec()) at most once per key, the body its input; a
// request it does not finish answers 202 with the operation's state and
// Retry-After, until the completer or a retry finishes it (see
// idempotency_layer::handle(db, req, operation)). `operation` must outlive the server.
[[nodiscard]] inline httplib_handler idempotent(idempotency_layer& layer, database& db,
                                                const operation<response>& operation, httplib_options options = {}) {
    return detail::adapt(
        layer,
        [&db, &operation](idempotency_layer& l, const request& req, const resolved_options&,
                          idem::detail::function_ref<response(unit_of_work*)>) { return l.handle(db, req, operation); },
        [](unit_of_work*, const httplib::Request&, httplib::Response&) {}, std::move(options));
}

// Lease mode: wraps `handler` so each keyed request runs it at most once, its record
// written outside the handler's own transactions. A response with a content provider
// (streamed) is sent but not stored, and its key released.
[[nodiscard]] IDEM_API httplib_handler idempotent(idempotency_layer& layer, httplib_handler handler,
                                                  httplib_options options = {});

// The reconciliation route: GET on layer.options().reconcile_path, answered by
// layer.reconcile() (see there), the key read from the layer's key header and the
// caller from options.claims_of, as the layer's POST routes read them. Registers
// nothing while the path is empty (the default):
//
//   idem::http::serve_reconciliation(server, layer, {.claims_of = verify_token});
//   // GET /idempotency with Idempotency-Key: k-1  ->  {"state":"completed","status":201,...}
IDEM_API void serve_reconciliation(httplib::Server& server, idempotency_layer& layer, httplib_options options = {});

// Makes `server` safe for hostile input; takes its exception and pre-routing handlers:
// - an exception from any handler is answered 500 problem+json (Server.InternalError)
//   with a correlation id (body and X-Correlation-Id); the exception text goes to
//   `telemetry` only (event idem.http.exception, with the correlation id), never to the
//   client (cpp-httplib's default sends it in an EXCEPTION_WHAT header);
// - a request with a header value holding NUL is answered 400 Request.HeaderInvalid.
IDEM_API void protect(httplib::Server& server, std::shared_ptr<telemetry_sink> telemetry = nullptr);

// Binds `server` to host:port (port 0: a free one) with room for `backlog` connections
// waiting to be accepted, turns TCP_NODELAY on for the connections it accepts, and
// returns the port; then call server.listen_after_bind(). Debian's cpp-httplib is a
// compiled library whose backlog is fixed at 5, so a burst of connections otherwise
// waits out SYN retransmits (seconds each); and it writes a response in several
// segments, which without TCP_NODELAY wait for the client's delayed ACK (40 ms a
// response on a keep-alive connection). The kernel caps `backlog` at
// net.core.somaxconn. Throws std::system_error when it cannot bind.
[[nodiscard]] IDEM_API int bind_with_backlog(httplib::Server& server, const std::string& host, int port,
                                             int backlog = 1024);

}  // namespace idem::http
