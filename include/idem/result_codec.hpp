// idem/result_codec.hpp: how an operation's result becomes stored bytes.
//
// A codec serializes a result, reads it back for replays and classifies it:
// keep it for the retention, keep it briefly as a failure, or free the key.
// Results of type std::string, an integer or void need none: default_codec<T>
// is what the executor, idem::database and the inbox use when none is given.
//
//   auto codec = idem::make_codec<receipt>(
//       [](const receipt& r) { return r.to_json(); },
//       [](std::string_view bytes) { return receipt::from_json(bytes); },
//       [](const receipt& r) { return r.ok ? idem::classification::store
//                                          : idem::classification::release; });
#pragma once

#include <concepts>
#include <limits>
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

// A codec whose record keeps a redacted copy of each result: the caller that
// ran the work gets the result itself, every replay gets what `redact` left
// (say so to your clients). Secrets a replay never needs (a card number, a
// one-time token) are then stored nowhere, encrypted or not.
//
//   const idem::string_codec plain;
//   const idem::redacting_codec codec(plain, [](std::string r) { return mask_card(std::move(r)); });
//   auto e = exec.execute(key, fingerprint, {}, [&] { return charge(); }, codec);
//
// `inner` must outlive it; classification is the inner codec's, of the result as it was.
template <class T, class Redact>
requires std::is_invocable_r_v<T, const Redact&, T>
class redacting_codec final : public result_codec<T> {
public:
    redacting_codec(const result_codec<T>& inner, Redact redact) : inner_(inner), redact_(std::move(redact)) {}

    [[nodiscard]] std::string serialize(const T& value) const override { return inner_.serialize(redact_(value)); }
    [[nodiscard]] T deserialize(std::string_view payload) const override { return inner_.deserialize(payload); }
    [[nodiscard]] classification classify(const T& value) const override { return inner_.classify(value); }

private:
    const result_codec<T>& inner_;
    Redact redact_;
};

template <class T, class Redact>
redacting_codec(const result_codec<T>&, Redact) -> redacting_codec<T, Redact>;

namespace detail {

[[nodiscard]] IDEM_API long long parse_signed(std::string_view payload, long long min, long long max);
[[nodiscard]] IDEM_API unsigned long long parse_unsigned(std::string_view payload, unsigned long long max);

template <class>
inline constexpr bool no_default_codec = false;

// What work that returns void produces: stored as nothing, replayed as nothing.
struct unit {};

}  // namespace detail

// The codec for results of type T when the call names none. Defined for
// std::string (stored as it is), integers (decimal text) and detail::unit
// (void results); idem::database adds mapped rows it can read back (idem/mapping.hpp).
template <class T>
class default_codec {
    static_assert(detail::no_default_codec<T>,
                  "idem: this result type has no default codec; pass one (idem::make_codec)");
};

template <>
class default_codec<std::string> final : public result_codec<std::string> {
public:
    [[nodiscard]] std::string serialize(const std::string& value) const override { return value; }
    [[nodiscard]] std::string deserialize(std::string_view payload) const override { return std::string(payload); }
};

// Stores a std::string result as it is.
using string_codec = default_codec<std::string>;

template <class T>
requires(std::integral<T> && !std::same_as<T, bool>) class default_codec<T> final : public result_codec<T> {
public:
    [[nodiscard]] std::string serialize(const T& value) const override { return std::to_string(value); }
    [[nodiscard]] T deserialize(std::string_view payload) const override {
        if constexpr (std::is_signed_v<T>)
            return static_cast<T>(
                detail::parse_signed(payload, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
        else
            return static_cast<T>(detail::parse_unsigned(payload, std::numeric_limits<T>::max()));
    }
};

template <>
class default_codec<detail::unit> final : public result_codec<detail::unit> {
public:
    [[nodiscard]] std::string serialize(const detail::unit&) const override { return {}; }
    [[nodiscard]] detail::unit deserialize(std::string_view) const override { return {}; }
};

// Whether T has a default codec of its own (without a database to read rows back from).
template <class T>
concept has_default_codec = std::same_as<T, std::string> || std::same_as<T, detail::unit> ||
    (std::integral<T> && !std::same_as<T, bool>);

}  // namespace idem
