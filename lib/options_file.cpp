// Executor options from a JSON file. nlohmann-json stays in this file: no public
// header names it.
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "idem/encryption.hpp"
#include "idem/error.hpp"
#include "idem/options.hpp"
#include "internal/options_file.hpp"

namespace idem {
namespace {

using json = nlohmann::json;
using store_names = std::set<std::string, std::less<>>;

constexpr std::string_view duration_hint = "a whole number and a unit (ns, us, ms, s, m, h, d), such as \"90s\"";

// Reads one file into executor_options, naming every field it cannot take in `problems`.
class options_reader {
public:
    explicit options_reader(std::vector<std::string>& problems) : problems_(problems) {}

    executor_options read(const json& root) {
        executor_options o;
        if (!expect_object(root, "the document")) return o;
        for (const auto& [name, value] : root.items()) {
            if (name == "mode")
                read_mode(value, name, o.mode);
            else if (name == "lease")
                read_duration(value, name, o.lease);
            else if (name == "max_lease")
                read_duration(value, name, o.max_lease);
            else if (name == "retention")
                read_duration(value, name, o.retention);
            else if (name == "failure_retention")
                read_duration(value, name, o.failure_retention);
            else if (name == "store")
                read_string(value, name, o.store);
            else if (name == "profiles")
                read_profiles(value, o.profiles);
            else if (name == "http")
                o.http = read_http(value, name).applied_to(o.http);
            else if (name == "encryption_keys_file")
                read_keys_file(value, name, o.encryption);
            else
                unknown(name);
        }
        return o;
    }

private:
    // The ring is read with the document, so a reload takes a rotated keys file too.
    void read_keys_file(const json& value, const std::string& path, std::shared_ptr<const encryption_keys>& out) {
        std::string file;
        if (!read_string(value, path, file)) return;
        try {
            out = std::make_shared<const encryption_keys>(encryption_keys::from_file(file));
        } catch (const options_error& e) {
            problems_.push_back(path + ": " + e.what());
        }
    }

    // An "http" object, at the top level or in a profile (`where` names it).
    http_overrides read_http(const json& value, const std::string& where) {
        http_overrides http;
        if (!expect_object(value, where)) return http;
        for (const auto& [name, field] : value.items()) {
            const std::string path = where + "." + name;
            if (name == "header_name") {
                std::string text;
                if (read_string(field, path, text)) http.header_name = std::move(text);
            } else if (name == "require_key") {
                if (field.is_boolean())
                    http.require_key = field.get<bool>();
                else
                    problems_.push_back(path + " must be true or false");
            } else if (name == "unscoped") {
                std::string text;
                if (!read_string(field, path, text)) continue;
                if (text == "reject")
                    http.unscoped = unscoped_behavior::reject;
                else if (text == "bypass")
                    http.unscoped = unscoped_behavior::bypass;
                else
                    problems_.push_back(path + ": unknown behaviour \"" + text + "\" (reject or bypass)");
            } else {
                unknown(path);
            }
        }
        return http;
    }

    void read_profiles(const json& value, std::map<std::string, profile_options, std::less<>>& profiles) {
        if (!expect_object(value, "profiles")) return;
        for (const auto& [profile, fields] : value.items()) {
            const std::string where = "profiles." + profile;
            if (!expect_object(fields, where)) continue;
            profile_options& p = profiles[profile];
            for (const auto& [name, field] : fields.items()) {
                const std::string path = where + "." + name;
                if (name == "mode")
                    read_mode(field, path, p.mode.emplace());
                else if (name == "lease")
                    read_duration(field, path, p.lease.emplace());
                else if (name == "retention")
                    read_duration(field, path, p.retention.emplace());
                else if (name == "failure_retention")
                    read_duration(field, path, p.failure_retention.emplace());
                else if (name == "remember")
                    read_duration(field, path, p.remember.emplace());
                else if (name == "store")
                    read_string(field, path, p.store.emplace());
                else if (name == "http")
                    p.http = read_http(field, path);
                else
                    unknown(path);
            }
        }
    }

    bool expect_object(const json& value, const std::string& what) {
        if (value.is_object()) return true;
        problems_.push_back(what + " must be a JSON object");
        return false;
    }

    void unknown(const std::string& path) { problems_.push_back(path + ": unknown field"); }

    bool read_string(const json& value, const std::string& path, std::string& out) {
        if (!value.is_string()) {
            problems_.push_back(path + " must be a string");
            return false;
        }
        out = value.get<std::string>();
        return true;
    }

    void read_mode(const json& value, const std::string& path, mode& out) {
        std::string text;
        if (!read_string(value, path, text)) return;
        try {
            out = parse_mode(text);
        } catch (const std::invalid_argument&) {
            problems_.push_back(path + ": unknown mode \"" + text + "\" (off, observe or enforce)");
        }
    }

    void read_duration(const json& value, const std::string& path, duration& out) {
        std::string text;
        if (!value.is_string()) {
            problems_.push_back(path + " must be a string: " + std::string(duration_hint));
            return;
        }
        text = value.get<std::string>();
        if (auto d = parse_duration(text)) {
            out = *d;
            return;
        }
        problems_.push_back(path + ": \"" + text + "\" is not " + std::string(duration_hint));
    }

    // "90s", "15m", "250ms": digits, then one unit; nullopt when malformed or out of range.
    static std::optional<duration> parse_duration(std::string_view text) {
        std::size_t digits = 0;
        while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
        if (digits == 0 || digits > 18) return std::nullopt;
        const std::string_view unit = text.substr(digits);
        using namespace std::chrono;
        const std::pair<std::string_view, duration> units[] = {
            {"ns", nanoseconds(1)}, {"us", microseconds(1)}, {"ms", milliseconds(1)}, {"s", seconds(1)},
            {"m", minutes(1)},      {"h", hours(1)},         {"d", hours(24)}};
        for (const auto& [name, size] : units) {
            if (unit != name) continue;
            const long long count = std::stoll(std::string(text.substr(0, digits)));
            if (count > std::numeric_limits<duration::rep>::max() / size.count()) return std::nullopt;
            return size * count;
        }
        return std::nullopt;
    }

    std::vector<std::string>& problems_;
};

executor_options parse(std::string_view text, std::vector<std::string>& problems) {
    json root;
    try {
        root = json::parse(text);
    } catch (const json::parse_error& e) {
        problems.push_back("not valid JSON (at byte " + std::to_string(e.byte) + ")");  // never the text itself
        return {};
    }
    return options_reader(problems).read(root);
}

// Parses and checks; throws options_error with every problem.
executor_options checked(std::string_view text, const store_names* stores) {
    std::vector<std::string> problems;
    executor_options options = parse(text, problems);
    if (problems.empty() || problems.front().rfind("not valid JSON", 0) != 0) {
        auto semantic = options.problems(stores);
        problems.insert(problems.end(), semantic.begin(), semantic.end());
    }
    if (!problems.empty()) throw options_error(std::move(problems));
    return options;
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    if (in) text << in.rdbuf();
    if (!in || in.bad()) throw options_error({"file " + path.string() + ": cannot be read"});
    return std::move(text).str();
}

}  // namespace

executor_options executor_options_from_json(std::string_view text) {
    return checked(text, nullptr);
}

namespace detail {

executor_options read_options_file(const std::filesystem::path& path, const store_names* stores) {
    return checked(read_file(path), stores);
}

}  // namespace detail

}  // namespace idem
