// Any --db URL, duration, --since time, --key-hash and record-naming flags, as the idem
// command receives them: each parser accepts a value it can stand behind or
// refuses with std::invalid_argument (the flags with CLI11's own errors), and a
// refused URL's message never repeats credentials.
#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "database_arg.hpp"
#include "digest_arg.hpp"
#include "duration_arg.hpp"
#include "fuzz_input.hpp"
#include "record_key_flags.hpp"
#include "time_arg.hpp"

namespace {

void database_url(std::string_view text) {
    try {
        const auto url = idem::cli::parse_database_url(text);
        if (url.location.empty()) throw std::logic_error("a URL without a location");
    } catch (const std::invalid_argument& e) {
        if (text.find('@') != std::string_view::npos && std::string_view(e.what()).find('@') != std::string_view::npos)
            throw std::logic_error("a refused URL's message repeats its credentials");
    }
}

void duration(std::string_view text) {
    try {
        const idem::duration d = idem::cli::parse_duration(text);
        if (d < idem::duration::zero() || d % std::chrono::milliseconds(1) != idem::duration::zero())
            throw std::logic_error("a negative duration, or one finer than milliseconds");
        (void)idem::cli::describe(d);
    } catch (const std::invalid_argument& e) {
        // Every refusal names the accepted units.
        if (std::string_view(e.what()).find(idem::cli::duration_forms) == std::string_view::npos)
            throw std::logic_error("a refused duration's message does not name the accepted forms");
    }
}

// A time (or a duration back from a fixed now) is one from 1970 on, before 2201 (with an offset, a day into it).
void since_time(std::string_view text) {
    using namespace std::chrono;
    const idem::time_point now{sys_days(year(2026) / 12 / 1).time_since_epoch()};
    try {
        const idem::time_point t = idem::cli::parse_time(text, now);
        if (t < idem::time_point{} || t >= idem::time_point{sys_days(year(2201) / 1 / 2).time_since_epoch()})
            throw std::logic_error("a time outside 1970 to 2200");
    } catch (const std::invalid_argument&) {
    }
}

void digest(std::string_view text) {
    try {
        const auto d = idem::cli::parse_digest(text);
        for (std::size_t i = 0; i < d.size(); ++i) {
            const auto byte = std::to_integer<unsigned>(d[i]);
            const char expected[] = {"0123456789abcdef"[byte >> 4], "0123456789abcdef"[byte & 15]};
            for (std::size_t j = 0; j < 2; ++j)
                if ((text[2 * i + j] | 0x20) != expected[j]) throw std::logic_error("the digest is not the text's");
        }
    } catch (const std::invalid_argument&) {
    }
}

void key_flags(const std::vector<std::string_view>& words) {
    CLI::App app("fuzz");
    idem::cli::record_key_flags flags;
    flags.add_to(app, false);
    std::vector<std::string> args(words.rbegin(), words.rend());  // CLI11 takes them last first
    try {
        app.parse(args);
        const idem::record_key key = flags.build();
        if (key.name_space() != flags.name_space || key.key() != flags.key) throw std::logic_error("wrong key");
    } catch (const CLI::Error&) {
    } catch (const std::invalid_argument&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data, size));
    database_url(idem::fuzz::part(parts, 0));
    duration(idem::fuzz::part(parts, 1));
    since_time(idem::fuzz::part(parts, 1));
    digest(idem::fuzz::part(parts, 2));
    if (parts.size() > 3) key_flags(std::vector<std::string_view>(parts.begin() + 3, parts.end()));
    return 0;
}
