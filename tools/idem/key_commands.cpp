#include "key_commands.hpp"

#include <iostream>
#include <memory>
#include <optional>

#include "idem/keys.hpp"
#include "idem/record_key.hpp"
#include "record_key_flags.hpp"

namespace idem::cli {
namespace {

std::vector<std::string_view> views(const std::vector<std::string>& ids) {
    return {ids.begin(), ids.end()};
}

}  // namespace

void add_key_commands(CLI::App& app, int& exit_code) {
    auto* key = app.add_subcommand("key", "Derive, hash and check idempotency keys");
    key->require_subcommand(1);

    struct derive_args {
        std::string operation;
        std::vector<std::string> ids;
    };
    auto derive = std::make_shared<derive_args>();
    auto* d = key->add_subcommand("derive", "Print keys::derive(OPERATION, ID...)");
    d->add_option("operation", derive->operation, "Operation name")->required();
    d->add_option("ids", derive->ids, "Business ids (after -- they may start with -)");
    d->callback([derive] { std::cout << keys::derive(derive->operation, views(derive->ids)) << '\n'; });

    auto* u = key->add_subcommand("uuid", "Print keys::to_uuid_v5(OPERATION, ID...)");
    u->add_option("operation", derive->operation, "Operation name")->required();
    u->add_option("ids", derive->ids, "Business ids");
    u->callback([derive] { std::cout << keys::to_uuid_v5(derive->operation, views(derive->ids)) << '\n'; });

    auto message = std::make_shared<std::pair<std::string, std::string>>();
    auto* m = key->add_subcommand("message", "Print keys::from_message(MESSAGE_ID, CONSUMER)");
    m->add_option("message_id", message->first, "Message id")->required();
    m->add_option("consumer", message->second, "Consumer name")->required();
    m->callback([message] { std::cout << keys::from_message(message->first, message->second) << '\n'; });

    auto storage = std::make_shared<record_key_flags>();
    auto* s = key->add_subcommand("storage", "Print the storage key, then the key hash, of one record");
    storage->add_to(*s, true);
    s->callback([storage] {
        const record_key k = storage->build();
        std::cout << k.to_storage_key() << '\n' << k.key_hash() << '\n';
    });

    auto valid = std::make_shared<std::string>();
    auto* v = key->add_subcommand("valid", "Exit 0 when KEY is a valid Idempotency-Key value, else 1");
    v->add_option("key", *valid, "Key to check")->required();
    v->callback([valid, &exit_code] { exit_code = keys::is_valid(*valid) ? 0 : 1; });
}

}  // namespace idem::cli
