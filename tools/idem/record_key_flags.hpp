// The flags that name one record: --namespace, one scope flag, --key.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "idem/record_key.hpp"

namespace idem::cli {

struct record_key_flags {
    std::string name_space, key;
    bool global = false;
    std::string user, tenant, client;
    std::vector<std::string> user_and_tenant, custom;

    // Adds the flags; `required` makes --namespace and --key mandatory.
    void add_to(CLI::App& command, bool required);
    // Whether any of the flags was given.
    [[nodiscard]] bool given() const { return !name_space.empty() || !key.empty() || scoped(); }
    // Whether a scope flag was given.
    [[nodiscard]] bool scoped() const {
        return global || !user.empty() || !tenant.empty() || !client.empty() || !user_and_tenant.empty() ||
               !custom.empty();
    }
    // Throws CLI::ValidationError unless exactly one scope flag is given;
    // std::invalid_argument for a part idem rejects (empty, invalid UTF-8, too long).
    [[nodiscard]] record_key build() const;
    // The scope alone, as build() checks it.
    [[nodiscard]] scope owner() const;
};

}  // namespace idem::cli
