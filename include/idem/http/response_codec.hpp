// idem/http/response_codec.hpp: how the layer stores a response and which
// responses it keeps. Use it directly to give an endpoint the Idempotency-Key
// contract inside a database transaction:
//
//   idem::http::response_codec codec{layer.options()};
//   auto e = exec.execute(tx, key, fingerprint, {.entry = idem::entry_point::http},
//                         [&] { return run_endpoint(tx); }, codec);
//   return layer.answer(std::move(e));
#pragma once

#include <string>
#include <vector>

#include "idem/export.hpp"
#include "idem/http/layer.hpp"
#include "idem/result_codec.hpp"

namespace idem::http {

class IDEM_API response_codec final : public result_codec<response> {
public:
    explicit response_codec(const layer_options& options)
        : replayed_headers_(options.replayed_headers), max_stored_body_(options.max_stored_body) {}

    // Status, the allow-listed headers (never Set-Cookie) and the exact body bytes.
    // std::invalid_argument for what the stored form cannot hold: a status outside
    // 100-999, more than 65535 allow-listed headers, a header name or value of 4 GiB.
    [[nodiscard]] std::string serialize(const response& r) const override;
    // Throws std::runtime_error for bytes serialize did not write.
    [[nodiscard]] response deserialize(std::string_view payload) const override;
    // Above the size cap, streamed, or not storable (see serialize): release.
    // 503/504: keep in flight. Other 5xx: store as failure.
    // 408, 409, 425, 429 (not final): release. Everything else: store.
    [[nodiscard]] classification classify(const response& r) const override;

private:
    std::vector<std::string> replayed_headers_;
    std::size_t max_stored_body_;
};

}  // namespace idem::http
