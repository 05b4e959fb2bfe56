// `idem key ...` run as a process: exact output, literal ids after --, UTF-8
// checks, exit codes; and --help on every subcommand.
#include <doctest/doctest.h>

#include "cli_support.hpp"
#include "idem/keys.hpp"

namespace {

using idem::test::cli::workspace;

const std::string bad_utf8 = "caf\xC3";  // a truncated two-byte sequence

}  // namespace

TEST_CASE("key derive, uuid and message print the value and one newline") {
    workspace w;
    auto r = w.idem({"key", "derive", "refund", "order-1", "r-2"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "6:refund|7:order-1|3:r-2\n");
    CHECK(r.err.empty());

    r = w.idem({"key", "derive", "refund"});
    CHECK(r.out == idem::keys::derive("refund") + "\n");

    r = w.idem({"key", "uuid", "refund", "order-1", "r-2"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == idem::keys::to_uuid_v5("refund", {"order-1", "r-2"}) + "\n");
    CHECK(r.out.size() == 37);

    r = w.idem({"key", "message", "msg-42", "billing.invoice-created"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == idem::keys::from_message("msg-42", "billing.invoice-created") + "\n");
    CHECK(r.out == "7:message|23:billing.invoice-created|6:msg-42\n");
}

TEST_CASE("key storage prints the storage key, then the key hash") {
    workspace w;
    const auto r =
        w.idem({"key", "storage", "--namespace", "payments.capture", "--tenant", "acme", "--key", "order-17"});
    CHECK(r.exit_code == 0);
    const idem::record_key k{"payments.capture", idem::scope::tenant("acme"), "order-17"};
    CHECK(r.out == k.to_storage_key() + "\n" + k.key_hash() + "\n");
    CHECK(r.out.starts_with("idem:v3:16:payments.capture|11:tenant:acme|8:order-17\n"));

    const auto both = w.idem({"key", "storage", "--namespace", "n", "--user-and-tenant", "u", "t", "--key", "k"});
    const idem::record_key k2{"n", idem::scope::user_and_tenant("u", "t"), "k"};
    CHECK(both.out == k2.to_storage_key() + "\n" + k2.key_hash() + "\n");
}

TEST_CASE("after -- ids starting with - are literal") {
    workspace w;
    auto r = w.idem({"key", "derive", "refund", "--", "-x", "--y"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "6:refund|2:-x|3:--y\n");

    r = w.idem({"key", "derive", "--", "-op", "-1"});
    CHECK(r.out == "3:-op|2:-1\n");

    r = w.idem({"key", "message", "--", "-m", "-c"});
    CHECK(r.out == idem::keys::from_message("-m", "-c") + "\n");

    // Without -- they are options, and unknown ones.
    r = w.idem({"key", "derive", "refund", "-x"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
}

TEST_CASE("invalid UTF-8 arguments are a usage error") {
    workspace w;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"key", "derive", "refund", bad_utf8},
             {"key", "derive", bad_utf8},
             {"key", "uuid", "refund", bad_utf8},
             {"key", "message", bad_utf8, "consumer"},
             {"key", "storage", "--namespace", "n", "--global", "--key", bad_utf8},
             {"key", "storage", "--namespace", bad_utf8, "--global", "--key", "k"},
             {"key", "storage", "--namespace", "n", "--user", bad_utf8, "--key", "k"},
         }) {
        const auto r = w.idem(args);
        CAPTURE(args[1]);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        CHECK(r.err.find("UTF-8") != std::string::npos);
    }
}

TEST_CASE("key valid exits 0 for a valid key, 1 otherwise, and prints nothing; 2 for an argument not in UTF-8") {
    workspace w;
    auto r = w.idem({"key", "valid", "8e03978e-40d5-43e8-bc93-6894a57f9324"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK(w.idem({"key", "valid", "has space"}).exit_code == 1);
    CHECK(w.idem({"key", "valid", "quote\""}).exit_code == 1);
    CHECK(w.idem({"key", "valid", std::string(256, 'a')}).exit_code == 1);
    CHECK(w.idem({"key", "valid", std::string(255, 'a')}).exit_code == 0);
    r = w.idem({"key", "valid", "caf\xE9"});  // Latin-1, as a terminal in another locale sends it
    CHECK(r.exit_code == 2);
    CHECK(r.err == "idem: argument 3 is not UTF-8; give keys, ids and paths as UTF-8 text\n");
    CHECK(w.idem({"key", "valid", "--", "-starts-with-dash"}).exit_code == 0);
    CHECK(w.idem({"key", "valid"}).exit_code == 2);  // missing KEY
}

TEST_CASE("missing or unknown subcommands and flags are usage errors") {
    workspace w;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {},
             {"frobnicate"},
             {"key"},
             {"key", "derive"},
             {"key", "message", "only-one"},
             {"key", "storage", "--global", "--key", "k"},                                     // no --namespace
             {"key", "storage", "--namespace", "n", "--key", "k"},                             // no scope
             {"key", "storage", "--namespace", "n", "--global", "--user", "u", "--key", "k"},  // two scopes
             {"key", "storage", "--namespace", "n", "--global"},                               // no --key
             {"migrate"},
             {"purge"},
             {"inspect", "--key-hash", std::string(64, 'a')},
             {"purge", "--db", "x.db", "--bogus"},
         }) {
        const auto r = w.idem(args);
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
    }
}

TEST_CASE("an unknown command is named, with the commands there are") {
    workspace w;
    auto r = w.idem({"bogus"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    // `relay` and `outbox` come with idem::database and the HTTP sink.
    const std::string outbox_commands = IDEM_CLI_OUTBOX ? ", relay, outbox" : "";
    CHECK(
        r.err ==
        "idem: unknown command 'idem bogus'; the commands are migrate, purge, key, inspect, forget, complete, reseal" +
            outbox_commands + " (`idem --help`)\n");
    r = w.idem({"key", "derived", "refund"});
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "idem: unknown command 'idem key derived'; the commands are derive, uuid, message, storage, valid "
          "(`idem key --help`)\n");
    // The arguments of a command are not commands.
    r = w.idem({"key", "derive", "bogus"});
    CHECK(r.exit_code == 0);
}

TEST_CASE("--help on every subcommand") {
    workspace w;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--help"},
             {"migrate", "--help"},
             {"purge", "--help"},
             {"inspect", "--help"},
             {"key", "--help"},
             {"key", "derive", "--help"},
             {"key", "uuid", "--help"},
             {"key", "message", "--help"},
             {"key", "storage", "--help"},
             {"key", "valid", "--help"},
             {"complete", "--help"},
         }) {
        const auto r = w.idem(args);
        CAPTURE(args.front());
        CHECK(r.exit_code == 0);
        CHECK(r.out.find("Usage:") != std::string::npos);
    }
    CHECK(w.idem({"purge", "--help"}).out.find("--older-than") != std::string::npos);
    CHECK(w.idem({"inspect", "--help"}).out.find("--payload") != std::string::npos);
    CHECK(w.idem({"complete", "--help"}).out.find("--compensate") != std::string::npos);
}
