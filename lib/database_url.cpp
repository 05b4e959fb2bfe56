#include "idem/database_url.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "internal/store_forms.hpp"

namespace idem {
namespace {

[[noreturn]] void reject(std::string_view why) {
    throw std::invalid_argument("idem: the database " + std::string(why) + detail::use_accepted_forms());
}

bool is_scheme(std::string_view s) {
    return !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") ==
                             std::string_view::npos;
}

database_url answered(const store_url_form& form, std::string_view text) {
    if (!form.location) return {form.scheme, std::string(text)};
    try {
        return {form.scheme, form.location(text)};
    } catch (const std::invalid_argument& e) {
        reject(e.what());
    }
}

}  // namespace

std::string database_url_forms() {
    std::vector<store_url_form> forms = detail::registered_forms();
    std::ranges::sort(forms, {}, &store_url_form::scheme);
    std::string text;
    for (const store_url_form& form : forms) {
        if (form.description.empty()) continue;
        if (!text.empty()) text += ", or ";
        text += form.description;
    }
    return text;
}

std::string detail::use_accepted_forms() {
    const std::string forms = database_url_forms();
    return forms.empty() ? "; this program links no store that opens database URLs" : "; use " + forms;
}

database_url database_url::parse(std::string_view text) {
    if (text.empty()) reject("name is empty");
    if (text.find('\0') != std::string_view::npos) reject("name contains a NUL byte");
    const std::vector<store_url_form> forms = detail::registered_forms();
    // The longest prefix that opens the text; of two alike, the later registration's.
    const store_url_form* prefixed = nullptr;
    std::size_t matched = 0;
    for (const store_url_form& form : forms)
        for (const std::string& prefix : form.prefixes)
            if (!prefix.empty() && text.starts_with(prefix) && prefix.size() >= matched) {
                prefixed = &form;
                matched = prefix.size();
            }
    if (prefixed != nullptr) return answered(*prefixed, text);
    if (const auto colon = text.find("://"); colon != std::string_view::npos && is_scheme(text.substr(0, colon)))
        reject("URL has an unknown scheme (" + std::string(text.substr(0, std::min<std::size_t>(colon, 20))) +
               "): no store this program links answers it");
    // The forms without a prefix: exactly one store must claim the text.
    const store_url_form* recognised = nullptr;
    for (const store_url_form& form : forms) {
        if (!form.recognises || !form.recognises(text)) continue;
        if (recognised != nullptr)
            reject("name reads as a name of two stores (" + recognised->display_name + ", " + form.display_name +
                   "): write it in a form with a scheme");
        recognised = &form;
    }
    if (recognised != nullptr) return answered(*recognised, text);
    // Never repeat the text: a connection string may carry a password.
    reject("name is none of the accepted forms");
}

}  // namespace idem
