#include <iostream>
#include <memory>
#include <string>

#include "admin_commands.hpp"
#include "database_arg.hpp"

namespace idem::cli {

void add_migrate_command(CLI::App& app) {
    auto url = std::make_shared<std::string>();
    auto* command = app.add_subcommand("migrate", "Create or upgrade the schema: apply the pending migrations");
    add_database_option(*command, *url);
    command->callback([url] {
        const database_url db = parse_database_url(*url);
        const auto applied = on_database(db, [&] { return open_store(db, open_mode::create).admin->migrate(); });
        for (const auto& name : applied) std::cout << "applied " << name << '\n';
        if (applied.empty()) std::cout << "nothing to apply: the schema is up to date\n";
    });
}

}  // namespace idem::cli
