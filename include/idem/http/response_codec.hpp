// idem/http/response_codec.hpp: how the layer stores a response and which
// responses it keeps: the status, the allow-listed headers and the exact body.
//
//   idem::http::response_codec codec{layer.options()};
//   std::string stored = codec.serialize(res);             // what the record holds
//   idem::http::response replayed = codec.deserialize(stored);
//   bool kept = codec.classify(res) == idem::classification::store;
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "idem/export.hpp"
#include "idem/http/layer.hpp"
#include "idem/result_codec.hpp"

namespace idem::http {

class IDEM_API response_codec final : public result_codec<response> {
public:
    explicit response_codec(const layer_options& options)
        : replayed_headers_(options.replayed_headers),
          max_stored_body_(options.max_stored_body),
          release_server_errors_(options.release_server_errors),
          redact_(options.redact) {}

    // Status, the allow-listed headers (never Set-Cookie) and the exact body bytes,
    // of the response as the layer's redact hook left it.
    // std::invalid_argument for what the stored form cannot hold: a status outside
    // 100-999, more than 65535 allow-listed headers, a header name or value of 4 GiB.
    [[nodiscard]] std::string serialize(const response& r) const override;
    // Throws std::runtime_error for bytes serialize did not write.
    [[nodiscard]] response deserialize(std::string_view payload) const override;
    // Whether serialize can keep it whole: not streamed, the body within the size cap,
    // and nothing serialize refuses.
    [[nodiscard]] bool storable(const response& r) const;
    // Not storable: release.
    // 503/504: keep in flight. Other 5xx: store as failure (release, with the
    // layer's release_server_errors).
    // 408, 409, 425, 429 (not final): release. Everything else: store.
    [[nodiscard]] classification classify(const response& r) const override;

private:
    std::vector<std::string> replayed_headers_;
    std::size_t max_stored_body_;
    bool release_server_errors_;
    std::function<void(response&)> redact_;
};

}  // namespace idem::http
