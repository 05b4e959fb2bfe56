// A build without idem::database or the HTTP sink has no `idem relay` and no `idem outbox`.
#include "outbox_commands.hpp"

namespace idem::cli {

void add_outbox_commands(CLI::App& app) {
    (void)app;
}

}  // namespace idem::cli
