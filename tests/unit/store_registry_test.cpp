// The store registry read and opened through the core alone: the stores here
// are registered by the test as it runs, as a store library registers as it
// loads, and the core reads and opens their URLs with no line of its own. This
// program links no SQL store, so theirs are the only forms it knows.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "idem/database_url.hpp"
#include "idem/error.hpp"
#include "idem/store_registry.hpp"

namespace {

bool contains(std::string_view text, std::string_view part) {
    return text.find(part) != std::string_view::npos;
}

// The message parse() refuses `text` with.
std::string refusal(std::string_view text) {
    try {
        (void)idem::database_url::parse(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    FAIL("accepted a name it should refuse");
    return {};
}

struct demo_opened {
    idem::database_url url;
    std::size_t pool_size = 0;
};

// demo://NAME or a bare NAME.demo; its factory opens no database but says what it was asked.
demo_opened last_demo;

void register_demo() {
    idem::register_store({.scheme = "demo",
                          .display_name = "Demo",
                          .prefixes = {"demo://"},
                          .recognises = [](std::string_view text) { return text.ends_with(".demo"); },
                          .location =
                              [](std::string_view text) {
                                  if (!text.starts_with("demo://")) return std::string(text);
                                  if (text.size() == 7) throw std::invalid_argument("URL demo:// needs a name");
                                  return std::string(text.substr(7));
                              },
                          .description = "demo://NAME or a name ending in .demo"},
                         [](const idem::database_url& url, const idem::store_request& request) {
                             last_demo = {url, request.pool_size};
                             if (url.location == "unreachable")
                                 throw idem::store_error(idem::store_failure::connection_lost,
                                                         "idem: demo unreachable");
                             return idem::opened_store{};
                         });
}

}  // namespace

TEST_CASE("store registry: a store registered at run time answers its URLs, and open_store reaches its factory") {
    register_demo();
    const auto url = idem::database_url::parse("demo://ledger");
    CHECK(url.scheme == "demo");
    CHECK(url.location == "ledger");
    const auto bare = idem::database_url::parse("books.demo");
    CHECK(bare.scheme == "demo");
    CHECK(bare.location == "books.demo");

    (void)idem::open_store(url, {.pool_size = 3});
    CHECK(last_demo.url.scheme == "demo");
    CHECK(last_demo.url.location == "ledger");
    CHECK(last_demo.pool_size == 3);
    CHECK_THROWS_AS((void)idem::open_store(idem::database_url::parse("demo://unreachable")), idem::store_error);

    const auto form = idem::registered_store("demo");
    REQUIRE(form);
    CHECK(form->display_name == "Demo");
    CHECK_FALSE(form->location_is_path);
    CHECK_FALSE(idem::registered_store("nowhere"));
    CHECK(contains(idem::database_url_forms(), "demo://NAME or a name ending in .demo"));
}

TEST_CASE("store registry: what no store answers is refused by the core, never repeating the text") {
    register_demo();
    CHECK(contains(refusal(""), "name is empty"));
    CHECK(contains(refusal(std::string_view("demo://a\0b", 10)), "NUL byte"));
    // Every refusal names the accepted forms.
    for (const std::string_view text : {"", "records.txt", "xyz://root:secret@host/db", "demo://"})
        CHECK(contains(refusal(text), "; use demo://NAME or a name ending in .demo"));

    const std::string unknown = refusal("xyz://root:secret@host/db");
    CHECK(contains(unknown, "unknown scheme (xyz)"));
    CHECK_FALSE(contains(unknown, "secret"));
    // The scheme is cut to 20 characters.
    CHECK(contains(refusal("abcdefghijklmnopqrstuvwxyz://x"), "(abcdefghijklmnopqrst)"));
    const std::string none = refusal("user=root password=secret");
    CHECK(contains(none, "none of the accepted forms"));
    CHECK_FALSE(contains(none, "secret"));
    // The store's own refusal, completed by the core.
    CHECK(contains(refusal("demo://"), "idem: the database URL demo:// needs a name; use "));

    // A URL of a scheme no store registered cannot be opened.
    CHECK_THROWS_AS((void)idem::open_store({.scheme = "nowhere", .location = "x"}), std::invalid_argument);
}

TEST_CASE("store registry: two stores, their forms joined; a name both claim is refused") {
    register_demo();
    idem::register_store({.scheme = "echo",
                          .display_name = "Echo",
                          .prefixes = {"echo:"},
                          .recognises = [](std::string_view text) { return text.starts_with("e="); },
                          .description = "echo:TEXT"},
                         [](const idem::database_url&, const idem::store_request&) { return idem::opened_store{}; });
    const auto echo = idem::database_url::parse("echo:a.demo");  // its prefix first: the location is the text whole
    CHECK(echo.scheme == "echo");
    CHECK(echo.location == "echo:a.demo");
    CHECK(idem::database_url::parse("demo://e=x").scheme == "demo");
    CHECK(contains(refusal("e=a.demo"), "a name of two stores (Demo, Echo)"));
    // Sorted by scheme, whatever order the stores loaded in.
    CHECK(idem::database_url_forms() == "demo://NAME or a name ending in .demo, or echo:TEXT");

    // A later registration of a scheme replaces the earlier one.
    idem::register_store({.scheme = "echo", .prefixes = {"echo2:"}, .description = "echo2:TEXT"},
                         [](const idem::database_url&, const idem::store_request&) { return idem::opened_store{}; });
    CHECK(idem::registered_store("echo")->display_name == "echo");
    CHECK(idem::database_url::parse("echo2:x").scheme == "echo");
    CHECK(contains(refusal("echo:x"), "none of the accepted forms"));
    CHECK(idem::database_url::parse("e=a.demo").scheme == "demo");

    CHECK_THROWS_AS(
        idem::register_store(
            {.scheme = ""}, [](const idem::database_url&, const idem::store_request&) { return idem::opened_store{}; }),
        std::invalid_argument);
    CHECK_THROWS_AS(idem::register_store({.scheme = "nofactory"}, {}), std::invalid_argument);
}
