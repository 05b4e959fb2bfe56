// idem/http/webhook_sink.hpp: an outbox sink (idem/outbox_relay.hpp) that POSTs
// each message to a URL, signed with the timestamped scheme
// idem::webhook::receiver verifies (`t=...,v1=...`, one v1 per secret while
// rotating), so one idem service delivers to another.
//
//   auto sink = std::make_shared<idem::http::webhook_sink>(idem::http::webhook_sink_options{
//       .url = "http://ledger.internal:8080/events", .secrets = {current_secret, previous_secret}});
//   idem::outbox_relay relay{db, sink};
//
// A 2xx answer is delivered; 408, 409, 425, 429, 5xx and no answer at all are
// tried again later (Retry-After honoured); any other status is refused and
// dead-letters the message with the answer kept. The receiver finds the event
// id in the Idem-Message-Id header (webhook::id_from_header). Link idem_httplib.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "idem/export.hpp"
#include "idem/outbox_relay.hpp"
#include "idem/webhook.hpp"

namespace idem::http {

struct webhook_sink_options {
    std::string url = {};                   // http://host[:port]/path
    std::vector<std::string> secrets = {};  // each signs (rotation: the new one and the old one)
    webhook::timestamped_signature scheme = {};
    std::string id_header = "Idem-Message-Id";
    std::string topic_header = "Idem-Topic";
    std::string ordering_key_header = "Idem-Ordering-Key";
    std::chrono::milliseconds connect_timeout{2000};
    // The longest wait for the receiver (to take the request, to answer it);
    // one slower than this is sent the message again later: a duplicate.
    std::chrono::milliseconds timeout{10000};
};

class IDEM_API webhook_sink final : public outbox_sink {
public:
    // options_error naming every invalid option (a URL that is not http://, no secret, an empty one).
    explicit webhook_sink(webhook_sink_options options);
    ~webhook_sink() override;

    // Thread-safe: each call borrows a keep-alive connection of its own.
    delivery_result deliver(const outbox_delivery& message) override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace idem::http
