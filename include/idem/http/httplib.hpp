// idem/http/httplib.hpp: the Idempotency-Key layer on a cpp-httplib server.
//
//   idem::http::idempotency_layer layer{store, {.resolver = idem::scopes::user()}};
//   server.Post("/payments", idem::http::idempotent(layer, [&](const httplib::Request& req,
//                                                            httplib::Response& res) {
//       res.set_content(create_payment(req.body), "application/json");
//   }, {.claims_of = [](const httplib::Request& req) { return verify_token(req); }}));
//
// Link idem_httplib (pkg-config idem-httplib). `layer` must outlive the server.
#pragma once

#include <functional>

#include "idem/export.hpp"
#include "idem/http/layer.hpp"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace idem::http {

// Same type as httplib::Server::Handler.
using httplib_handler = std::function<void(const httplib::Request&, httplib::Response&)>;

struct IDEM_API httplib_options {
    // The caller's claims, from whatever authenticated the request; none by default.
    std::function<claims(const httplib::Request&)> claims_of = nullptr;
};

// Wraps `handler` so each keyed request runs it at most once. A response with a
// content provider (streamed) is sent but not stored, and its key released.
[[nodiscard]] IDEM_API httplib_handler idempotent(idempotency_layer& layer, httplib_handler handler,
                                         httplib_options options = {});

}  // namespace idem::http
