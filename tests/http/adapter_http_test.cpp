// The cpp-httplib adapter against hostile input and bursts, on loopback: exceptions
// never leak, NUL in a header is refused, multipart bodies are fingerprinted, and 500
// simultaneous connections are all answered.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>

#include "../support/recording_sink.hpp"
#include "idem/memory_store.hpp"
#include "loopback_server.hpp"

using namespace idem;
using namespace std::chrono_literals;
using namespace std::string_literals;

namespace {

// A socket to 127.0.0.1:port, closed with the object.
class raw_socket {
public:
    explicit raw_socket(int port, bool blocking = true) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        REQUIRE(fd_ >= 0);
        if (!blocking) ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(static_cast<std::uint16_t>(port));
        ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
        const int rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address);
        REQUIRE((rc == 0 || (!blocking && errno == EINPROGRESS)));
    }
    ~raw_socket() { ::close(fd_); }
    raw_socket(const raw_socket&) = delete;
    raw_socket& operator=(const raw_socket&) = delete;
    [[nodiscard]] int fd() const noexcept { return fd_; }

    // Sends `request` whole and reads until the server closes (requests say Connection: close).
    std::string exchange(std::string_view request) {
        for (std::size_t sent = 0; sent < request.size();) {
            const ssize_t n = ::write(fd_, request.data() + sent, request.size() - sent);
            REQUIRE(n > 0);
            sent += static_cast<std::size_t>(n);
        }
        std::string answer;
        char buffer[4096];
        for (ssize_t n; (n = ::read(fd_, buffer, sizeof buffer)) > 0;)
            answer.append(buffer, static_cast<std::size_t>(n));
        return answer;
    }

private:
    int fd_;
};

std::string raw_post(const std::string& path, const std::string& header_lines, const std::string& body = "x") {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + header_lines +
           "Content-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct guarded_service {
    std::shared_ptr<test::recording_sink> logs = std::make_shared<test::recording_sink>();
    http::idempotency_layer layer;
    test::loopback_server http;
    std::atomic<int> runs{0};

    explicit guarded_service(mode m = mode::enforce)
        : layer(std::make_shared<memory_store>(), {.mode = m}, {.resolver = scopes::user()}, logs) {
        const http::httplib_options as_alice{.claims_of = [](const httplib::Request&) { return claims{{"sub", "a"}}; }};
        http.server.Post("/sql",
                         http::idempotent(
                             layer,
                             [this](const httplib::Request&, httplib::Response& res) {
                                 ++runs;
                                 res.set_header("X-Partial", "written before the failure");
                                 throw std::runtime_error(
                                     "ERROR: duplicate key value violates unique constraint; SELECT balance FROM "
                                     "accounts WHERE id = 'alice' (pid 4242)");
                             },
                             as_alice));
        http.server.Get("/odd", [](const httplib::Request&, httplib::Response&) { throw 42; });
        http.server.Post("/echo", http::idempotent(
                                      layer,
                                      [this](const httplib::Request& req, httplib::Response& res) {
                                          ++runs;
                                          std::string parts;
                                          for (const auto& [name, file] : req.files)
                                              parts += name + "=" + file.content + ";";
                                          res.status = 201;
                                          res.set_content("run " + std::to_string(runs.load()) + " " + req.body + parts,
                                                          "text/plain");
                                      },
                                      as_alice));
        http::protect(http.server, logs);
        http.start();
    }
};

bool leaks(const httplib::Result& r) {
    std::string text = r->body;
    for (const auto& [name, value] : r->headers) text += name + ": " + value + "\n";
    return text.find("SELECT") != std::string::npos || text.find("EXCEPTION_WHAT") != std::string::npos ||
           text.find("duplicate key") != std::string::npos || text.find("4242") != std::string::npos ||
           text.find("X-Partial") != std::string::npos;
}

}  // namespace

TEST_CASE("adapter: an exception is a 500 problem+json with a correlation id; its text goes to the log only") {
    guarded_service s;
    httplib::Client client = s.http.client();
    std::vector<httplib::Result> answers;
    answers.push_back(client.Post("/sql", {{"Idempotency-Key", "k"}}, "x", "text/plain"));
    answers.push_back(client.Post("/sql", {{"Idempotency-Key", "k"}}, "x", "text/plain"));  // 409: still in flight
    answers.push_back(client.Post("/sql", "x", "text/plain"));                              // no key
    answers.push_back(client.Get("/odd"));                                                  // not a std::exception
    for (const auto& r : answers) {
        REQUIRE(r);
        CHECK_FALSE(leaks(r));
    }
    const auto& first = answers.front();
    CHECK(first->status == 500);
    CHECK(first->get_header_value("Content-Type") == "application/problem+json");
    CHECK(first->get_header_value("Cache-Control") == "no-store");
    CHECK(first->body.find("\"code\":\"Server.InternalError\"") != std::string::npos);
    const std::string correlation = first->get_header_value("X-Correlation-Id");
    CHECK(correlation.size() == 36);
    CHECK(first->body.find("\"correlation_id\":\"" + correlation + "\"") != std::string::npos);
    CHECK(answers[1]->status == 409);
    CHECK(answers[2]->status == 500);
    CHECK(answers[3]->status == 500);
    CHECK(answers[2]->get_header_value("X-Correlation-Id") != correlation);
    CHECK(s.runs == 2);

    int logged = 0;
    for (const auto& l : s.logs->logs()) {
        if (l.name != "idem.http.exception") continue;
        ++logged;
        if (l.message.find(correlation) != std::string::npos)
            CHECK(l.message.find("SELECT balance FROM accounts") != std::string::npos);
    }
    CHECK(logged == 3);
}

TEST_CASE("adapter: a header value holding NUL is 400 Request.HeaderInvalid and runs nothing, in every mode") {
    for (mode m : {mode::enforce, mode::observe, mode::off}) {
        CAPTURE(to_string(m));
        guarded_service s(m);
        // cpp-httplib 0.11 keeps the NUL (and decodes %00 into one): "k\0one" must not act as "k".
        for (const std::string& lines :
             {std::string("Idempotency-Key: k\0one\r\n", 24), std::string("Idempotency-Key: k%00one\r\n"),
              std::string("Idempotency-Key: k\r\nX-User: alice\0x\r\n", 37)}) {
            const std::string answer = raw_socket(s.http.port()).exchange(raw_post("/echo", lines));
            CHECK(answer.starts_with("HTTP/1.1 400"));
            CHECK(answer.find("Request.HeaderInvalid") != std::string::npos);
            CHECK(answer.find("application/problem+json") != std::string::npos);
        }
        // Routes without the layer are covered by protect().
        const std::string unwrapped =
            raw_socket(s.http.port())
                .exchange("GET /odd HTTP/1.1\r\nHost: h\r\nConnection: close\r\nX-A: a\0b\r\n\r\n"s);
        CHECK(unwrapped.starts_with("HTTP/1.1 400"));
        CHECK(s.runs == 0);
        // "k" itself was never used: its first request runs.
        const std::string fresh = raw_socket(s.http.port()).exchange(raw_post("/echo", "Idempotency-Key: k\r\n"));
        CHECK(fresh.starts_with("HTTP/1.1 201"));
        CHECK(fresh.find("Idempotent-Replayed") == std::string::npos);
        CHECK(s.runs == 1);
    }
}

TEST_CASE("adapter: the wrapped handler refuses NUL in a header by itself, without protect()") {
    http::idempotency_layer layer(std::make_shared<memory_store>());
    test::loopback_server http;
    int runs = 0;
    http.server.Post("/echo", http::idempotent(layer, [&](const httplib::Request&, httplib::Response& res) {
                         ++runs;
                         res.set_content("ran", "text/plain");
                     }));
    http.start();
    const std::string answer =
        raw_socket(http.port()).exchange(raw_post("/echo", std::string("Idempotency-Key: k\0one\r\n", 24)));
    CHECK(answer.starts_with("HTTP/1.1 400"));
    CHECK(answer.find("Request.HeaderInvalid") != std::string::npos);
    CHECK(runs == 0);
}

TEST_CASE("adapter: multipart bodies are fingerprinted by their parts") {
    guarded_service s;
    httplib::Client client = s.http.client();
    const httplib::MultipartFormDataItems form = {{"note", "rent", "", ""},
                                                  {"scan", "PDF-1", "march.pdf", "application/pdf"}};
    const httplib::Headers key{{"Idempotency-Key", "upload-1"}};
    auto first = client.Post("/echo", key, form);  // each request gets a random boundary
    REQUIRE(first);
    CHECK(first->status == 201);
    CHECK(first->body.find("note=rent;scan=PDF-1;") != std::string::npos);
    auto same = client.Post("/echo", key, form);
    CHECK(same->status == 201);
    CHECK(same->get_header_value("Idempotent-Replayed") == "true");
    CHECK(same->body == first->body);

    for (const auto& other : std::vector<httplib::MultipartFormDataItems>{
             {{"note", "rent", "", ""}, {"scan", "PDF-2", "march.pdf", "application/pdf"}},  // content
             {{"note", "rent", "", ""}, {"scan", "PDF-1", "april.pdf", "application/pdf"}},  // filename
             {{"note", "rent", "", ""}, {"scan", "PDF-1", "march.pdf", "text/plain"}},       // content type
             {{"memo", "rent", "", ""}, {"scan", "PDF-1", "march.pdf", "application/pdf"}},  // name
             {{"note", "rent", "", ""}}}) {                                                  // a part less
        auto reused = client.Post("/echo", key, other);
        CHECK(reused->status == 422);
        CHECK(reused->body.find("Idempotency.KeyReused") != std::string::npos);
    }
    CHECK(s.runs == 1);
}

TEST_CASE("adapter: bind_with_backlog queues 500 connections where cpp-httplib's own binding queues a handful") {
    const auto connected_while_nobody_accepts = [](httplib::Server& server, int port) {
        std::vector<std::unique_ptr<raw_socket>> sockets;
        for (int i = 0; i < 500; ++i) sockets.push_back(std::make_unique<raw_socket>(port, false));
        // A connection the kernel queued for accept() completes its handshake at once.
        const auto deadline = std::chrono::steady_clock::now() + 1500ms;
        std::vector<bool> done(sockets.size(), false);
        int count = 0;
        while (std::chrono::steady_clock::now() < deadline && count < 500) {
            std::vector<pollfd> fds;
            for (const auto& s : sockets) fds.push_back({s->fd(), POLLOUT, 0});
            ::poll(fds.data(), fds.size(), 100);
            for (std::size_t i = 0; i < fds.size(); ++i) {
                int error = 0;
                socklen_t length = sizeof error;
                if (done[i] || !(fds[i].revents & POLLOUT)) continue;
                ::getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &error, &length);
                if (error == 0) done[i] = true, ++count;
            }
        }
        (void)server;
        return count;
    };
    {
        httplib::Server server;
        const int port = http::bind_with_backlog(server, "127.0.0.1", 0, 1024);
        CHECK(connected_while_nobody_accepts(server, port) == 500);
    }
    {
        httplib::Server server;
        const int port = server.bind_to_any_port("127.0.0.1");
        CHECK(connected_while_nobody_accepts(server, port) < 50);  // the compiled-in backlog of 5
    }
}

TEST_CASE("adapter: 500 simultaneous connections on loopback are all answered") {
    guarded_service s;
    constexpr int connections = 500;
    std::vector<std::unique_ptr<raw_socket>> sockets;
    for (int i = 0; i < connections; ++i) sockets.push_back(std::make_unique<raw_socket>(s.http.port(), false));
    std::vector<std::string> requests, answers(connections);
    std::vector<std::size_t> written(connections, 0);
    std::vector<bool> closed(connections, false);
    for (int i = 0; i < connections; ++i)
        requests.push_back(raw_post("/echo", "Idempotency-Key: burst-" + std::to_string(i) + "\r\n"));

    const auto started = std::chrono::steady_clock::now();
    int open = connections;
    while (open > 0 && std::chrono::steady_clock::now() - started < 30s) {
        std::vector<pollfd> fds;
        for (int i = 0; i < connections; ++i) {
            const short events = written[i] < requests[i].size() ? POLLOUT : POLLIN;
            fds.push_back({closed[i] ? -1 : sockets[i]->fd(), events, 0});
        }
        ::poll(fds.data(), fds.size(), 100);
        for (int i = 0; i < connections; ++i) {
            if (closed[i] || fds[i].revents == 0) continue;
            if (written[i] < requests[i].size()) {
                const ssize_t n = ::write(fds[i].fd, requests[i].data() + written[i], requests[i].size() - written[i]);
                if (n > 0) written[i] += static_cast<std::size_t>(n);
                continue;
            }
            char buffer[4096];
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) {
                answers[i].append(buffer, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EAGAIN) {
                closed[i] = true;
                --open;
            }
        }
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    int answered = 0;
    for (const auto& a : answers) answered += a.starts_with("HTTP/1.1 201") ? 1 : 0;
    MESSAGE(answered, " of ", connections, " connections answered 201 in ", took.count(), " ms");
    CHECK(answered == connections);
    CHECK(s.runs == connections);
}
