#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "idem/record_store.hpp"

TEST_CASE("tokens: 32 lowercase hex characters, never repeated") {
    std::set<std::string> seen;
    for (int i = 0; i < 5000; ++i) {
        const std::string token = idem::detail::new_token();
        CHECK(token.size() == 32);
        CHECK(token.find_first_not_of("0123456789abcdef") == std::string::npos);
        CHECK(seen.insert(token).second);
    }
}

TEST_CASE("tokens: a forked child never draws the tokens its parent draws next") {
    (void)idem::detail::new_token();  // the pool now holds tokens a careless child would repeat
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const std::string token = idem::detail::new_token();
        const ssize_t written = write(fds[1], token.data(), token.size());
        _exit(written == static_cast<ssize_t>(token.size()) ? 0 : 1);
    }
    close(fds[1]);
    const std::string parent_token = idem::detail::new_token();
    char buffer[32];
    REQUIRE(read(fds[0], buffer, sizeof buffer) == static_cast<ssize_t>(sizeof buffer));
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(std::string(buffer, sizeof buffer) != parent_token);
}

TEST_CASE("tokens: the token of a record written whole is no reservation's, and no call may name it") {
    CHECK_THROWS_AS(idem::detail::check_token(idem::detail::unheld_token), std::invalid_argument);
    CHECK_NOTHROW(idem::detail::check_token(idem::detail::new_token()));
}
