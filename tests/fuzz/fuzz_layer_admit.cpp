// Any method, target, body, Idempotency-Key field lines and caller claims, under
// every resolver and option the layer has: admit never throws and decides one
// thing (a 400 problem, a key with the request's fingerprint, or neither).
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "fuzz_input.hpp"
#include "idem/http/fingerprint.hpp"
#include "idem/http/layer.hpp"
#include "idem/keys.hpp"
#include "idem/memory_store.hpp"

namespace {

constexpr std::size_t resolvers = 5;

idem::scope_resolver resolver(std::size_t i) {
    switch (i) {
        case 0: return idem::scopes::user();
        case 1: return idem::scopes::client();
        case 2: return idem::scopes::tenant("tenant_id");
        case 3: return idem::scopes::user_and_tenant("tenant_id");
        default: return nullptr;  // every caller shares one key space
    }
}

// Every resolver, with and without require_key, rejecting or bypassing the unscoped.
const std::array<std::unique_ptr<idem::http::idempotency_layer>, resolvers * 4>& layers() {
    static const auto all = [] {
        std::array<std::unique_ptr<idem::http::idempotency_layer>, resolvers * 4> out;
        const auto store = std::make_shared<idem::memory_store>();
        for (std::size_t i = 0; i < out.size(); ++i) {
            idem::executor_options live;
            live.http.require_key = (i / resolvers) % 2 == 1;
            live.http.unscoped =
                i / resolvers / 2 == 1 ? idem::http::unscoped_behavior::bypass : idem::http::unscoped_behavior::reject;
            out[i] = std::make_unique<idem::http::idempotency_layer>(
                store, live, idem::http::layer_options{.resolver = resolver(i % resolvers)});
        }
        return out;
    }();
    return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto& layer = *layers()[data[0] % layers().size()];
    // method, target, body, key field lines (\n between), claims (name=value, \n between)
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data + 1, size - 1));
    idem::http::request req{
        .method = idem::fuzz::part(parts, 0), .target = idem::fuzz::part(parts, 1), .body = idem::fuzz::part(parts, 2)};
    if (parts.size() > 3) req.key_headers = idem::fuzz::split(parts[3], '\n');
    for (const auto line : idem::fuzz::split(idem::fuzz::part(parts, 4), '\n')) {
        const auto equals = line.find('=');
        if (equals != std::string_view::npos) req.caller.emplace(line.substr(0, equals), line.substr(equals + 1));
    }

    const idem::http::admission a = layer.admit(req);
    if (a.answer && a.key) throw std::logic_error("both an answer and a key");
    if (!layer.options().methods.contains(req.method) && (a.answer || a.key))
        throw std::logic_error("a method the layer does not cover was judged");
    if (a.answer && (a.answer->status != 400 || a.answer->header("Content-Type") != "application/problem+json"))
        throw std::logic_error("an answer that is not a 400 problem");
    if (a.key) {
        if (!idem::keys::is_valid(a.key->key())) throw std::logic_error("admitted an invalid key");
        if (a.key->name_space() != layer.options().name_space) throw std::logic_error("wrong namespace");
        if (!layer.options().resolver && !a.key->owner().is_global()) throw std::logic_error("scope without resolver");
        if (a.fingerprint != idem::http::request_fingerprint(req.method, req.target, req.body))
            throw std::logic_error("the fingerprint is not the request's");
    } else if (!a.fingerprint.empty()) {
        throw std::logic_error("a fingerprint without a key");
    }
    return 0;
}
