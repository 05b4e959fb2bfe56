#!/usr/bin/env bash
# `meson install` puts headers, libraries, pkg-config files and the idem command
# in place, and a program builds against the installed tree with pkg-config alone.
#   install_check.sh BUILD_DIR COMPILER [SANITIZERS]
set -euo pipefail
build=$1 cxx=$2 sanitize=${3:-none}
# A sanitized library needs its runtime in the consumer too, as a user of such a build would link it.
flags=()
[ "$sanitize" = none ] || flags=("-fsanitize=$sanitize" -fno-sanitize=vptr)
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild >/dev/null
pcdir=$(dirname "$(find "$dest" -name idem.pc | head -1)")
libdir=$(dirname "$pcdir")
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest
cat >"$dest/consumer.cpp" <<'CPP'
#include <idem/idem.hpp>
#include <idem/memory_store.hpp>
#include <iostream>
int main() {
    idem::executor exec{std::make_shared<idem::memory_store>()};
    auto run = [] { return std::string("done"); };
    auto first = exec.execute(idem::record_key("ns", "k"), "fp", {}, run, idem::string_codec{});
    auto again = exec.execute(idem::record_key("ns", "k"), "fp", {}, run, idem::string_codec{});
    std::cout << idem::to_string(first.status()) << " " << idem::to_string(again.status()) << "\n";
}
CPP
# shellcheck disable=SC2046
"$cxx" -std=c++20 "${flags[@]}" "$dest/consumer.cpp" $(pkg-config --cflags --libs idem-memory) -o "$dest/consumer"
out=$(LD_LIBRARY_PATH=$libdir "$dest/consumer")
[ "$out" = "executed replayed" ] || { echo "consumer printed: $out"; exit 1; }
[ -x "$(find "$dest" -path '*/bin/idem' | head -1)" ] || { echo "the idem command is not installed"; exit 1; }
for pc in idem idem-memory; do pkg-config --exists "$pc" || { echo "$pc.pc missing"; exit 1; }; done
echo "installed tree builds a consumer: $out"
