#include "idem/http/httplib.hpp"

#include <httplib.h>

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
}

}  // namespace

httplib_handler idempotent(idempotency_layer& layer, httplib_handler handler, httplib_options options) {
    return [&layer, handler = std::move(handler), options = std::move(options)](const httplib::Request& req,
                                                                               httplib::Response& res) {
        const std::string& header = layer.options().header_name;
        std::vector<std::string> values;
        for (std::size_t i = 0, n = req.get_header_value_count(header); i < n; ++i)
            values.push_back(req.get_header_value(header, i));
        const std::vector<std::string_view> views(values.begin(), values.end());

        bool ran = false;
        const response out = layer.handle(
            {.method = req.method,
             .target = req.target,
             .body = req.body,
             .key_headers = views,
             .caller = options.claims_of ? options.claims_of(req) : claims{}},
            [&] {
                ran = true;
                handler(req, res);
                return captured(res);
            });
        // When the endpoint ran, `res` already holds its response (a streamed one included).
        if (!ran) write(out, res);
    };
}

}  // namespace idem::http
