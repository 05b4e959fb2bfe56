// idem/http/message.hpp: the framework-neutral request and response the
// Idempotency-Key layer works on. An adapter fills a request from its server's
// request and copies the response back:
//
//   idem::http::request req{.method = "POST", .target = "/transfers?dry=0", .body = raw_body,
//                           .key_headers = {"\"k-123\""}, .caller = {{"sub", "42"}}};
//   idem::http::response res = layer.handle(req, [&] { return run_endpoint(); });
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/export.hpp"
#include "idem/scope_resolvers.hpp"

namespace idem::http {

// One part of a multipart/form-data body, for servers that hand over the parts
// instead of the body bytes.
struct IDEM_API form_part {
    std::string_view name = {};
    std::string_view filename = {};
    std::string_view content_type = {};
    std::string_view content = {};
};

struct IDEM_API request {
    std::string_view method = {};
    std::string_view target = {};  // path and query, as received
    std::string_view body = {};
    // A multipart body as parsed parts (then `body` is empty); fingerprinted part by part.
    std::vector<form_part> parts = {};
    // Every value of the Idempotency-Key header field, one per field line.
    std::vector<std::string_view> key_headers = {};
    // Who is calling, as the application's auth layer decoded it.
    claims caller = {};
    // The route template ("/accounts/{id}") log events name the endpoint by; never the key.
    std::string_view route = {};
};

struct IDEM_API response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers = {};
    std::string body = {};
    // The body is produced while it is sent (a stream): it cannot be stored, so
    // the key is released after such a response.
    bool streamed = false;

    // The first value of a header, matched case-insensitively; empty when absent.
    [[nodiscard]] std::string_view header(std::string_view name) const;
    // Replaces every value of a header.
    void set_header(std::string_view name, std::string_view value);
};

// ASCII case-insensitive equality, for header names.
[[nodiscard]] IDEM_API bool header_name_equals(std::string_view a, std::string_view b) noexcept;

}  // namespace idem::http
