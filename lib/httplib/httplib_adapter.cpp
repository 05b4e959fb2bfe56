#include "idem/http/httplib.hpp"

#include <sys/socket.h>

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "idem/http/client.hpp"
#include "idem/http/problem.hpp"
#include "internal/exception_text.hpp"

namespace idem::http {
namespace {

response captured(const httplib::Response& res) {
    response r;
    r.status = res.status == -1 ? 200 : res.status;  // httplib sends 200 for an unset status
    r.headers.assign(res.headers.begin(), res.headers.end());
    r.body = res.body;
    r.streamed = static_cast<bool>(res.content_provider_);  // httplib keeps the provider in this member
    return r;
}

void write(const response& r, httplib::Response& res) {
    res.status = r.status;
    res.headers.clear();
    for (const auto& [name, value] : r.headers) res.headers.emplace(name, value);
    res.body = r.body;
    // What a handler that threw may have left behind.
    res.content_provider_ = nullptr;
    res.content_length_ = 0;
    res.is_chunked_content_provider_ = false;
}

// cpp-httplib keeps a NUL in a header value (and percent-decodes values, so "%00" becomes one).
bool holds_nul(const httplib::Request& req) {
    return std::any_of(req.headers.begin(), req.headers.end(),
                       [](const auto& h) { return h.second.find('\0') != std::string::npos; });
}

// cpp-httplib parses multipart/form-data into req.files (a multimap by name, in arrival order
// for equal names) and leaves req.body empty.
std::vector<form_part> parts_of(const httplib::Request& req) {
    std::vector<form_part> parts;
    parts.reserve(req.files.size());
    for (const auto& [name, file] : req.files) parts.push_back({name, file.filename, file.content_type, file.content});
    return parts;
}

// The key header's values, one per field line (duplicates are the layer's to refuse).
std::vector<std::string> key_values(const httplib::Request& req, const std::string& header) {
    std::vector<std::string> values;
    for (std::size_t i = 0, n = req.get_header_value_count(header); i < n; ++i)
        values.push_back(req.get_header_value(header, i));
    return values;
}

// cpp-httplib routes by regular expression: a path matched as written.
std::string exactly(std::string_view path) {
    std::string pattern;
    for (char c : path) {
        if (std::string_view(R"(\^$.|?*+()[]{})").find(c) != std::string_view::npos) pattern += '\\';
        pattern += c;
    }
    return pattern;
}

}  // namespace

namespace detail {

httplib_handler adapt(idempotency_layer& layer, layer_call call, httplib_endpoint endpoint, httplib_options options) {
    return [&layer, call = std::move(call), endpoint = std::move(endpoint), options = std::move(options)](
               const httplib::Request& req, httplib::Response& res) {
        if (holds_nul(req)) return write(problem(codes::header_invalid), res);
        const resolved_options live = layer.settings();
        const std::vector<std::string> values = key_values(req, live.http.header_name);
        const std::vector<std::string_view> views(values.begin(), values.end());

        auto run = [&](unit_of_work* uow) {
            endpoint(uow, req, res);
            return captured(res);
        };
        const response out =
            call(layer,
                 {.method = req.method,
                  .target = req.target,
                  .body = req.body,
                  .parts = parts_of(req),
                  .key_headers = views,
                  .caller = options.claims_of ? options.claims_of(req) : claims{},
                  .route = options.route.empty() ? std::string_view(req.path) : std::string_view(options.route)},
                 live, run);
        // A streamed response is only ever the endpoint's own, still in `res` (its content
        // provider cannot be copied). Anything else the layer answered goes out as it says,
        // replacing whatever the endpoint left in `res` (a replay, a 503, a refusal recorded).
        if (!out.streamed) write(out, res);
    };
}

}  // namespace detail

httplib_handler idempotent(idempotency_layer& layer, httplib_handler handler, httplib_options options) {
    return detail::adapt(
        layer,
        [](idempotency_layer& l, const request& req, const resolved_options& live,
           idem::detail::function_ref<response(unit_of_work*)> endpoint) {
            return l.handle(req, live, [&] { return endpoint(nullptr); });
        },
        [handler = std::move(handler)](unit_of_work*, const httplib::Request& req, httplib::Response& res) {
            handler(req, res);
        },
        std::move(options));
}

void serve_reconciliation(httplib::Server& server, idempotency_layer& layer, httplib_options options) {
    const std::string& path = layer.options().reconcile_path;
    if (path.empty()) return;
    server.Get(
        exactly(path), [&layer, options = std::move(options)](const httplib::Request& req, httplib::Response& res) {
            if (holds_nul(req)) return write(problem(codes::header_invalid), res);
            const std::vector<std::string> values = key_values(req, layer.settings().http.header_name);
            write(layer.reconcile(
                      {.method = req.method,
                       .target = req.target,
                       .key_headers = std::vector<std::string_view>(values.begin(), values.end()),
                       .caller = options.claims_of ? options.claims_of(req) : claims{},
                       .route = options.route.empty() ? std::string_view(req.path) : std::string_view(options.route)}),
                  res);
        });
}

void protect(httplib::Server& server, std::shared_ptr<telemetry_sink> telemetry) {
    if (!telemetry) telemetry = null_sink();
    server.set_exception_handler(
        [telemetry](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            const std::string correlation_id = new_key();
            const std::string message = "correlation_id=" + correlation_id + ": " + idem::detail::what_of(ep);
            telemetry->on_log({log_level::error,
                               "idem.http.exception",
                               {},
                               message,
                               {.entry = entry_point::http, .method = req.method, .route = req.path}});
            write(problem(codes::internal_error, correlation_id), res);
        });
    server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!holds_nul(req)) return httplib::Server::HandlerResponse::Unhandled;
        write(problem(codes::header_invalid), res);
        return httplib::Server::HandlerResponse::Handled;
    });
}

int bind_with_backlog(httplib::Server& server, const std::string& host, int port, int backlog) {
    // cpp-httplib listens with its compiled-in backlog; listen() again on the bound socket
    // (which Linux allows on a listening socket) sets ours. The options hook sees the socket.
    socket_t bound_socket = INVALID_SOCKET;
    server.set_socket_options([&bound_socket](socket_t s) {
        httplib::default_socket_options(s);
        bound_socket = s;
    });
    // Responses leave in several segments; Nagle's algorithm would hold each behind
    // the client's delayed ACK.
    server.set_tcp_nodelay(true);
    const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
    const int bind_errno = errno;
    server.set_socket_options(httplib::default_socket_options);
    if (bound <= 0 || bound_socket == INVALID_SOCKET)
        throw std::system_error(bind_errno, std::generic_category(),
                                "idem: cannot bind " + host + ":" + std::to_string(port));
    if (::listen(bound_socket, backlog) != 0)
        throw std::system_error(errno, std::generic_category(), "idem: cannot set the listen backlog");
    return bound;
}

}  // namespace idem::http
