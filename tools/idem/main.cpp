// idem: the operator's command for idempotency records.
//   idem migrate --db URL                 create or upgrade the schema
//   idem purge --db URL [...]             delete expired records in bounded batches
//   idem key derive|uuid|message|storage|valid ...
//   idem inspect --db URL --key-hash H    look at one record
//   idem inspect --redis URL --namespace NS --tenant T --key K   one record on a Redis ledger
//   idem inspect --db URL --namespace NS --recent N    the namespace's latest records
//   idem inspect --db URL --namespace NS --since T [--limit N]   what it completed since T
//   idem forget --db URL --key-hash H [--force]         delete one record
//   idem forget --redis URL --namespace NS --tenant T --key K   the same on a Redis ledger
//   idem relay --db URL --to URL --secret S [--drain]   deliver the outbox to a webhook receiver
//   idem outbox status|dead|requeue --db URL            the outbox's backlog and dead letters
//   idem complete --db URL [--namespace NS]             unfinished operations in steps
//   idem complete --db URL --key-hash H --expire|--compensate   hand one to the completer
//   idem reseal --db URL --keys FILE                    seal stored results under the newest key
// Exit codes: 0 done, 1 database error (or `key valid`: not valid), 2 usage
// error, 3 `inspect`, `forget`, `complete`: no such record or operation, 4
// `forget`: in flight, kept, 5 `complete`: an operation waits for a completer.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "admin_commands.hpp"
#include "database_arg.hpp"
#include "idem/error.hpp"
#include "key_commands.hpp"
#include "outbox_commands.hpp"
#include "usage_checks.hpp"

int main(int argc, char** argv) {
    CLI::App app{"idem: operate idempotency records (migrate, purge, key, inspect, forget, complete, reseal)", "idem"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Help for every subcommand");
    int exit_code = 0;
    idem::cli::add_migrate_command(app);
    idem::cli::add_purge_command(app);
    idem::cli::add_key_commands(app, exit_code);
    idem::cli::add_inspect_command(app, exit_code);
    idem::cli::add_forget_command(app, exit_code);
    idem::cli::add_complete_command(app, exit_code);
    idem::cli::add_reseal_command(app);
    idem::cli::add_outbox_commands(app);
    for (const auto& usage_error :
         {idem::cli::non_utf8_argument(argc, argv), idem::cli::unknown_command(app, argc, argv)}) {
        if (!usage_error) continue;
        std::cerr << *usage_error << '\n';
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        (void)app.exit(e);
        return 2;
    } catch (const std::invalid_argument& e) {
        std::cerr << e.what() << '\n';
        return 2;
    } catch (const idem::cli::command_error& e) {
        std::cerr << e.what() << '\n';
        return 1;
    } catch (const idem::error& e) {
        std::cerr << e.what() << '\n';
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "idem: " << e.what() << '\n';
        return 1;
    }
    return exit_code;
}
