// Any log message and profile name: log_sink writes exactly one line whose msg
// value unescapes to the message, and metrics_sink's Prometheus text keeps one
// sample per line, its profile label unescaping to the profile.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "fuzz_input.hpp"
#include "idem/telemetry.hpp"

namespace {

// The value of a quoted field that starts at `from` (just after its opening
// quote), unescaped (\\, \", \n, \r); `end` is set past its closing quote.
std::string unquote(const std::string& text, std::size_t from, std::size_t& end) {
    std::string out;
    for (std::size_t i = from; i < text.size(); ++i) {
        if (text[i] == '"') {
            end = i + 1;
            return out;
        }
        if (text[i] == '\\' && i + 1 < text.size()) {
            const char next = text[++i];
            out += next == 'n' ? '\n' : next == 'r' ? '\r' : next;
            continue;
        }
        out += text[i];
    }
    throw std::logic_error("a quoted value is not closed");
}

bool one_line(const std::string& text) {
    return !text.empty() && text.back() == '\n' && text.find_first_of("\r\n") == text.size() - 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto parts = idem::fuzz::split(idem::fuzz::as_text(data, size));
    const std::string message(idem::fuzz::part(parts, 0)), profile(idem::fuzz::part(parts, 1));

    std::ostringstream out;
    idem::log_sink logs(out);
    logs.on_log({idem::log_level::error, "idem.fuzz", "0123456789abcdef", message});
    const std::string line = out.str();
    if (!one_line(line)) throw std::logic_error("a log record is not exactly one line");
    const std::size_t msg = line.find(" msg=\"");
    std::size_t end = 0;
    // The operation's fields follow the message: the entry point first.
    if (msg == std::string::npos || unquote(line, msg + 6, end) != message ||
        line.compare(end, 13, " entry_point=") != 0)
        throw std::logic_error("the msg value does not unescape to the message");

    idem::metrics_sink metrics;
    metrics.on_decision({idem::entry_point::http, idem::outcome::executed, idem::mode::enforce, profile});
    const std::string text = metrics.render_prometheus();
    const std::size_t label = text.find("profile=\"");
    if (label == std::string::npos || unquote(text, label + 9, end) != profile || text.compare(end, 3, "} 1") != 0)
        throw std::logic_error("the profile label does not unescape to the profile");
    return 0;
}
