// idem/result_codec.hpp: how an operation's result becomes stored bytes.
//
// A codec serializes a result, reads it back for replays and classifies it:
// keep it for the retention, keep it briefly as a failure, or free the key.
//
//   auto codec = idem::make_codec<receipt>(
//       [](const receipt& r) { return r.to_json(); },
//       [](std::string_view bytes) { return receipt::from_json(bytes); },
//       [](const receipt& r) { return r.ok ? idem::classification::store
//                                          : idem::classification::release; });
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/export.hpp"

namespace idem {

enum class classification {
    store,             // kept for retention and replayed to retries
    store_as_failure,  // kept for failure_retention: a final failure, replayed briefly
    release,           // the key is freed: the failure's side effects were undone
    keep_in_flight,    // side effects unknown: the key stays in flight until its lease ends
};

template <class T>
class result_codec {
public:
    virtual ~result_codec() = default;
    [[nodiscard]] virtual std::string serialize(const T& value) const = 0;
    // Throws when the payload is not one of serialize's outputs.
    [[nodiscard]] virtual T deserialize(std::string_view payload) const = 0;
    [[nodiscard]] virtual classification classify(const T&) const { return classification::store; }
};

struct IDEM_API store_every_result {
    template <class T>
    classification operator()(const T&) const noexcept {
        return classification::store;
    }
};

template <class T, class Serialize, class Deserialize, class Classify>
class lambda_codec final : public result_codec<T> {
public:
    lambda_codec(Serialize s, Deserialize d, Classify c)
        : serialize_(std::move(s)), deserialize_(std::move(d)), classify_(std::move(c)) {}

    [[nodiscard]] std::string serialize(const T& value) const override { return serialize_(value); }
    [[nodiscard]] T deserialize(std::string_view payload) const override { return deserialize_(payload); }
    [[nodiscard]] classification classify(const T& value) const override { return classify_(value); }

private:
    Serialize serialize_;
    Deserialize deserialize_;
    Classify classify_;
};

// A codec from lambdas; without classify every result is stored.
template <class T, class Serialize, class Deserialize, class Classify = store_every_result>
[[nodiscard]] auto make_codec(Serialize serialize, Deserialize deserialize, Classify classify = {}) {
    return lambda_codec<T, Serialize, Deserialize, Classify>(std::move(serialize), std::move(deserialize),
                                                             std::move(classify));
}

// Stores a std::string result as it is.
class IDEM_API string_codec final : public result_codec<std::string> {
public:
    [[nodiscard]] std::string serialize(const std::string& value) const override { return value; }
    [[nodiscard]] std::string deserialize(std::string_view payload) const override { return std::string(payload); }
};

}  // namespace idem
