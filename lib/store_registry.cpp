#include "idem/store_registry.hpp"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace idem {
namespace {

struct registry {
    std::mutex mutex;
    std::map<database_url::backend, store_factory> factories;
};

registry& the_registry() {
    static registry r;
    return r;
}

std::string_view library_of(database_url::backend backend) noexcept {
    switch (backend) {
        case database_url::backend::sqlite: return "idem-sqlite (SOCI's sqlite3 backend and libsqlite3)";
        case database_url::backend::postgresql: return "idem-postgresql (SOCI's postgresql backend and libpq)";
    }
    return "the store's library";
}

}  // namespace

void register_store(database_url::backend backend, store_factory factory) {
    registry& r = the_registry();
    const std::lock_guard lock(r.mutex);
    r.factories[backend] = std::move(factory);
}

opened_store open_store(const database_url& url, const store_request& request) {
    store_factory factory;
    {
        registry& r = the_registry();
        const std::lock_guard lock(r.mutex);
        if (const auto it = r.factories.find(url.kind); it != r.factories.end()) factory = it->second;
    }
    if (!factory)
        throw std::invalid_argument("idem: this program has no store for that database: link " +
                                    std::string(library_of(url.kind)));
    return factory(url, request);
}

}  // namespace idem
