#include "record_key_flags.hpp"

namespace idem::cli {

void record_key_flags::add_to(CLI::App& command, bool required) {
    auto* ns = command.add_option("--namespace", name_space, "Record namespace, e.g. http or payments.capture");
    auto* k = command.add_option("--key", key, "The idempotency key");
    if (required) {
        ns->required();
        k->required();
    }
    command.add_flag("--global", global, "The global scope");
    command.add_option("--user", user, "scope::user(ID)");
    command.add_option("--tenant", tenant, "scope::tenant(ID)");
    command.add_option("--client", client, "scope::client(ID)");
    command.add_option("--user-and-tenant", user_and_tenant, "scope::user_and_tenant(USER, TENANT)")->expected(2);
    command.add_option("--custom", custom, "scope::custom(KIND, VALUE)")->expected(2);
}

scope record_key_flags::owner() const {
    const int scopes = (global ? 1 : 0) + (user.empty() ? 0 : 1) + (tenant.empty() ? 0 : 1) + (client.empty() ? 0 : 1) +
                       (user_and_tenant.empty() ? 0 : 1) + (custom.empty() ? 0 : 1);
    if (scopes != 1)
        throw CLI::ValidationError(
            "scope", "give exactly one of --global, --user, --tenant, --client, --user-and-tenant, --custom");
    return global            ? scope::global()
           : !user.empty()   ? scope::user(user)
           : !tenant.empty() ? scope::tenant(tenant)
           : !client.empty() ? scope::client(client)
           : !custom.empty() ? scope::custom(custom[0], custom[1])
                             : scope::user_and_tenant(user_and_tenant[0], user_and_tenant[1]);
}

record_key record_key_flags::build() const {
    return record_key(name_space, owner(), key);
}

}  // namespace idem::cli
