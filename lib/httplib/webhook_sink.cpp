#include "idem/http/webhook_sink.hpp"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <mutex>
#include <span>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/error.hpp"

namespace idem::http {
namespace {

struct target {
    std::string origin;  // scheme://host:port, what httplib::Client takes
    std::string path;
};

std::optional<target> parse_url(std::string_view url) {
    constexpr std::string_view scheme = "http://";
    if (!url.starts_with(scheme)) return std::nullopt;
    const auto slash = url.find('/', scheme.size());
    target t{std::string(url.substr(0, slash)), slash == std::string_view::npos ? "/" : std::string(url.substr(slash))};
    if (t.origin.size() == scheme.size()) return std::nullopt;
    return t;
}

bool is_token(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
}

bool is_field_value(std::string_view value) {
    return std::none_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; });
}

std::vector<std::string> problems_of(const webhook_sink_options& o) {
    std::vector<std::string> problems;
    if (!parse_url(o.url)) problems.emplace_back("url must be http://host[:port][/path]");
    if (o.secrets.empty()) problems.emplace_back("secrets must name at least one secret");
    if (std::any_of(o.secrets.begin(), o.secrets.end(), [](const std::string& s) { return s.empty(); }))
        problems.emplace_back("secrets must not be empty");
    for (const std::string* name : {&o.scheme.header, &o.id_header, &o.topic_header, &o.ordering_key_header})
        if (!is_token(*name)) problems.emplace_back("header names must be HTTP tokens");
    if (o.connect_timeout <= std::chrono::milliseconds(0) || o.timeout <= std::chrono::milliseconds(0))
        problems.emplace_back("connect_timeout and timeout must be positive");
    return problems;
}

// A retryable status (the same rule as the retrying client's): the receiver
// is busy, the request timed out, or an earlier delivery still runs there.
bool worth_retrying(int status) {
    return status == 408 || status == 409 || status == 425 || status == 429 || status >= 500;
}

std::chrono::milliseconds retry_after(const httplib::Result& r) {
    const std::string value = r->get_header_value("Retry-After");
    long long seconds = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || seconds < 0) return {};
    return std::chrono::milliseconds(std::min<long long>(seconds, 86400) * 1000);
}

}  // namespace

struct IDEM_LOCAL webhook_sink::impl {
    webhook_sink_options options;
    target to;
    std::mutex mutex;
    std::vector<std::unique_ptr<httplib::Client>> idle;  // keep-alive connections not in use

    std::unique_ptr<httplib::Client> borrow() {
        {
            std::lock_guard lock(mutex);
            if (!idle.empty()) {
                auto c = std::move(idle.back());
                idle.pop_back();
                return c;
            }
        }
        auto c = std::make_unique<httplib::Client>(to.origin);
        c->set_keep_alive(true);
        // A request goes out in several writes (headers, then the payload):
        // with Nagle's algorithm on, the payload would wait for the receiver's
        // delayed ACK of the headers, about 40 ms per message on Linux.
        c->set_tcp_nodelay(true);
        c->set_connection_timeout(options.connect_timeout);
        c->set_read_timeout(options.timeout);
        c->set_write_timeout(options.timeout);
        return c;
    }

    void give_back(std::unique_ptr<httplib::Client> c) {
        std::lock_guard lock(mutex);
        idle.push_back(std::move(c));
    }
};

webhook_sink::webhook_sink(webhook_sink_options options) {
    if (auto problems = problems_of(options); !problems.empty()) throw options_error(std::move(problems));
    impl_ = std::make_unique<impl>();
    impl_->to = *parse_url(options.url);
    impl_->options = std::move(options);
}

webhook_sink::~webhook_sink() = default;

delivery_result webhook_sink::deliver(const outbox_delivery& message) {
    const webhook_sink_options& o = impl_->options;
    httplib::Headers headers;
    std::string content_type = "application/octet-stream";
    for (const message_header& h : message.headers) {
        if (!is_token(h.name) || !is_field_value(h.value))
            return delivery_result::refused("a message header cannot be sent as an HTTP field");
        std::string lower = h.name;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        if (lower == "content-type")
            content_type = h.value;
        else
            headers.emplace(h.name, h.value);
    }
    headers.emplace(o.id_header, message.id);
    headers.emplace(o.topic_header, message.topic);
    if (message.ordering_key) headers.emplace(o.ordering_key_header, *message.ordering_key);
    // Signed as it leaves, so a delivery retried later carries a fresh timestamp.
    headers.emplace(o.scheme.header, webhook::sign_timestamped(o.secrets, message.payload,
                                                               std::chrono::system_clock::now(), o.scheme.version));
    std::unique_ptr<httplib::Client> client = impl_->borrow();
    httplib::Result r = client->Post(impl_->to.path, headers, message.payload, content_type);
    if (!r) {
        // No answer: the connection is dropped with the client, the next call opens one.
        return delivery_result::retry("no answer: " + httplib::to_string(r.error()));
    }
    impl_->give_back(std::move(client));
    const int status = r->status;
    if (status >= 200 && status < 300) return delivery_result::delivered();
    std::string answer = "HTTP " + std::to_string(status) + ": " + r->body.substr(0, 512);
    if (worth_retrying(status)) return delivery_result::retry(std::move(answer), retry_after(r));
    return delivery_result::refused(std::move(answer));
}

}  // namespace idem::http
