#include "operation_report.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "duration_arg.hpp"
#include "idem/encryption.hpp"
#include "idem/table_admin.hpp"
#include "internal/saturating_time.hpp"

namespace idem::cli {

std::string operation_id(const digest& d) {
    return hex(std::span(d).first(16));
}

std::optional<operation_state> read_operation(const opened_store& store, const digest& d) {
    return table_admin(store).operation(d);
}

std::string preview(std::string_view bytes) {
    if (encryption_keys::is_sealed(bytes))
        return fmt::format("sealed under \"{}\", {} bytes", encryption_keys::sealed_with(bytes), bytes.size());
    const bool printable = std::all_of(bytes.begin(), bytes.end(), [](char c) { return c >= ' ' && c <= '~'; });
    if (printable) {
        std::string text(bytes.substr(0, 60));
        if (bytes.size() > 60) text += "...";
        return fmt::format("\"{}\"", text);
    }
    const std::string_view head = bytes.substr(0, 16);
    return fmt::format("{} bytes, hex {}{}", bytes.size(), hex(std::as_bytes(std::span(head.data(), head.size()))),
                       bytes.size() > head.size() ? "..." : "");
}

std::string phase_of(const operation_state& s) {
    const std::string phase(to_string(s.phase));
    if (s.finished() || !s.expired()) return phase;
    return fmt::format("{} (lease ended {} ago)", phase, describe(detail::saturating_difference(s.now, s.expires_at)));
}

void print_operation(std::ostream& out, const operation_state& s) {
    const auto line = [&](std::string_view label, const std::string& value) {
        out << fmt::format("{:<16}{}\n", std::string(label) + ":", value);
    };
    line("operation", s.name_space);
    line("state", phase_of(s));
    line("recovery point", std::to_string(s.recovery_point));
    line("fence", std::to_string(s.fence));
    line("completer runs", std::to_string(s.completions));
    line("failed runs", std::to_string(s.failures));  // what compensate_after counts
    if (s.compensate_from) line("compensates at", fmt::format("step {}", *s.compensate_from));
    line("updated", utc(s.updated_at));
    line(s.finished() ? "retained until" : "lease until", utc(s.expires_at));
    line("input", fmt::format("{} bytes", s.input_bytes));
    if (s.finished()) line("result", preview(s.result));
    if (!s.last_error.empty()) line("last error", s.last_error);
    out << fmt::format("steps:\n  {:<4}{:<6}{:<20}{:<10}{:<10}{}\n", "#", "kind", "name", "state", "attempts",
                       "result");
    for (const operation_step& step : s.steps)
        out << fmt::format("  {:<4}{:<6}{:<20}{:<10}{:<10}{}{}\n", step.position, step.call ? "call" : "step",
                           step.name, step.answered ? "stored" : "made", step.attempts,
                           step.answered ? preview(step.result) : std::string("-"),
                           step.compensation ? "  (compensation)" : "");
}

}  // namespace idem::cli
