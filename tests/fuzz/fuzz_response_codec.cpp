// Any bytes as a stored response: decoding either fails with std::runtime_error
// or yields a response that re-encodes to itself, less the headers that are not
// replayed. Any response built from the bytes (status, headers, body) survives
// serialize and deserialize with exactly its replayed headers, or, when the
// stored form cannot hold it (here: a status outside 100-999), serialize refuses
// it with std::invalid_argument and classify releases it; classify follows its
// documented rules.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_input.hpp"
#include "idem/http/response_codec.hpp"

namespace {

using idem::classification;
using idem::http::response;
using headers = std::vector<std::pair<std::string, std::string>>;

const idem::http::layer_options options = [] {
    idem::http::layer_options o;
    o.replayed_headers.emplace_back("Set-Cookie");  // listed, yet never replayed
    o.max_stored_body = 64;
    return o;
}();
const idem::http::response_codec codec(options);

bool replayed(std::string_view name) {
    if (idem::http::header_name_equals(name, "Set-Cookie")) return false;
    return std::any_of(options.replayed_headers.begin(), options.replayed_headers.end(),
                       [&](const std::string& allowed) { return idem::http::header_name_equals(allowed, name); });
}

headers kept(const headers& all) {
    headers out;
    std::copy_if(all.begin(), all.end(), std::back_inserter(out), [](const auto& h) { return replayed(h.first); });
    return out;
}

bool storable(const response& r) {
    return r.status >= 100 && r.status <= 999 && kept(r.headers).size() <= 0xFFFF;
}

void check_round_trip(const response& r) {
    if (!storable(r)) {
        try {
            (void)codec.serialize(r);
        } catch (const std::invalid_argument&) {
            return;
        }
        throw std::logic_error("a response the stored form cannot hold was serialized");
    }
    const response again = codec.deserialize(codec.serialize(r));
    if (again.status != r.status || again.body != r.body || again.headers != kept(r.headers) || again.streamed)
        throw std::logic_error("a response did not survive serialize and deserialize");
}

void check_classify(const response& r) {
    const classification c = codec.classify(r);
    classification expected = classification::store;
    if (r.streamed || r.body.size() > options.max_stored_body || !storable(r))
        expected = classification::release;
    else if (r.status == 503 || r.status == 504)
        expected = classification::keep_in_flight;
    else if (r.status >= 500)
        expected = classification::store_as_failure;
    else if (r.status == 408 || r.status == 409 || r.status == 425 || r.status == 429)
        expected = classification::release;
    if (c != expected) throw std::logic_error("classify broke its rules");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = idem::fuzz::as_text(data, size);
    try {
        const response decoded = codec.deserialize(input);
        check_classify(decoded);
        const response again = codec.deserialize(codec.serialize(decoded));
        if (again.status != decoded.status || again.body != decoded.body || again.headers != kept(decoded.headers))
            throw std::logic_error("re-encoding changed the response");
    } catch (const std::runtime_error&) {
        // not bytes serialize writes: refused as it must be
    }

    // The same bytes as a response to store: two status bytes, a flags byte, then
    // the body, then header name and value pairs. Flags: 1 streamed, 2 the status
    // bytes as they are (else brought into 100-999). More than 65535 headers is a
    // unit test's: inputs that large would slow every run to a crawl.
    if (size < 3) return 0;
    response r;
    const int status = data[0] * 256 + data[1];
    r.status = (data[2] & 2) != 0 ? status : 100 + status % 900;
    r.streamed = (data[2] & 1) != 0;
    const auto parts = idem::fuzz::split(input.substr(3));
    r.body = parts.front();
    for (std::size_t i = 1; i + 1 < parts.size(); i += 2) r.headers.emplace_back(parts[i], parts[i + 1]);
    check_classify(r);
    check_round_trip(r);
    return 0;
}
