#include "idem/store_registry.hpp"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "internal/store_forms.hpp"

namespace idem {
namespace {

struct registered {
    store_url_form form;
    store_factory factory;
};

struct registry {
    std::mutex mutex;
    std::vector<registered> stores;  // in the order they registered
};

registry& the_registry() {
    static registry r;
    return r;
}

}  // namespace

void register_store(store_url_form form, store_factory factory) {
    if (form.scheme.empty()) throw std::invalid_argument("idem: a store registers a scheme");
    if (!factory) throw std::invalid_argument("idem: the store " + form.scheme + " registers no factory");
    if (form.display_name.empty()) form.display_name = form.scheme;
    registry& r = the_registry();
    const std::lock_guard lock(r.mutex);
    std::erase_if(r.stores, [&](const registered& s) { return s.form.scheme == form.scheme; });
    r.stores.push_back({std::move(form), std::move(factory)});
}

std::optional<store_url_form> registered_store(std::string_view scheme) {
    registry& r = the_registry();
    const std::lock_guard lock(r.mutex);
    const auto it = std::ranges::find(r.stores, scheme, [](const registered& s) { return s.form.scheme; });
    if (it == r.stores.end()) return std::nullopt;
    return it->form;
}

std::vector<store_url_form> detail::registered_forms() {
    registry& r = the_registry();
    const std::lock_guard lock(r.mutex);
    std::vector<store_url_form> forms;
    forms.reserve(r.stores.size());
    for (const registered& s : r.stores) forms.push_back(s.form);
    return forms;
}

opened_store open_store(const database_url& url, const store_request& request) {
    store_factory factory;
    {
        registry& r = the_registry();
        const std::lock_guard lock(r.mutex);
        const auto it = std::ranges::find(r.stores, url.scheme, [](const registered& s) { return s.form.scheme; });
        if (it != r.stores.end()) factory = it->factory;
    }
    if (!factory)
        throw std::invalid_argument("idem: this program links no store for " + url.scheme.substr(0, 20) + " URLs" +
                                    detail::use_accepted_forms());
    return factory(url, request);
}

}  // namespace idem
