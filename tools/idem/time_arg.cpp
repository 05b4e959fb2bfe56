#include "time_arg.hpp"

#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "duration_arg.hpp"

namespace idem::cli {
namespace {

[[noreturn]] void reject(std::string_view why) {
    throw std::invalid_argument(fmt::format("idem: {}; a time is {}", why, time_forms));
}

// Exactly `width` ASCII digits at `at`, as a number.
int digits(std::string_view text, std::size_t at, std::size_t width) {
    if (at + width > text.size()) reject("not a time");
    int value = 0;
    for (std::size_t i = at; i < at + width; ++i) {
        if (text[i] < '0' || text[i] > '9') reject("not a time");
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

void expect(std::string_view text, std::size_t at, char c) {
    if (at >= text.size() || text[at] != c) reject("not a time");
}

}  // namespace

time_point parse_time(std::string_view text, time_point now) {
    if (text.size() < 11 || text[4] != '-') {
        // Not a date: a duration back from now.
        duration ago{};
        try {
            ago = parse_duration(text);
        } catch (const std::invalid_argument&) {
            reject("not a time or a duration");
        }
        if (now - time_point{} < ago) reject("that duration reaches before 1970");
        return now - ago;
    }
    using namespace std::chrono;
    // YYYY-MM-DDTHH:MM[:SS[.fraction]](Z|+HH:MM|-HH:MM)
    const int y = digits(text, 0, 4);
    expect(text, 4, '-');
    const int mo = digits(text, 5, 2);
    expect(text, 7, '-');
    const int d = digits(text, 8, 2);
    if (text[10] != 'T' && text[10] != 't' && text[10] != ' ') reject("not a time: the date and time part with T");
    const int h = digits(text, 11, 2);
    expect(text, 13, ':');
    const int mi = digits(text, 14, 2);
    std::size_t at = 16;
    int s = 0;
    nanoseconds fraction{};
    if (at < text.size() && text[at] == ':') {
        s = digits(text, at + 1, 2);
        at += 3;
        if (at < text.size() && text[at] == '.') {
            ++at;
            std::size_t n = 0;
            std::int64_t value = 0;
            for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, ++n)
                if (n < 9) value = value * 10 + (text[at] - '0');
            if (n == 0) reject("not a time: no digits after the point");
            for (std::size_t i = n; i < 9; ++i) value *= 10;
            fraction = nanoseconds(value);
        }
    }
    minutes offset{};
    if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
        ++at;
    } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
        const int sign = text[at] == '+' ? 1 : -1;
        const int oh = digits(text, at + 1, 2);
        expect(text, at + 3, ':');
        const int om = digits(text, at + 4, 2);
        if (oh > 23 || om > 59) reject("not a time: a bad offset");
        offset = minutes(sign * (oh * 60 + om));
        at += 6;
    } else {
        reject("not a time: say which zone, Z for UTC");
    }
    if (at != text.size()) reject("not a time: something follows it");
    const year_month_day date{year(y), month(static_cast<unsigned>(mo)), day(static_cast<unsigned>(d))};
    if (!date.ok()) reject("no such date");
    if (h > 23 || mi > 59 || s > 60) reject("no such time of day");  // 60: a leap second, read as the next
    if (y < 1970 || y > 2200) reject("a time from 1970 to 2200 only");
    const auto t = sys_days(date) + hours(h) + minutes(mi) + seconds(s) - offset;
    if (t < sys_days(year(1970) / 1 / 1)) reject("a time from 1970 to 2200 only");
    return time_point(duration_cast<duration>(t.time_since_epoch()) + fraction);
}

}  // namespace idem::cli
