#!/usr/bin/env bash
# idem as a meson subproject: a parent project with idem in subprojects/ (and
# the wrap file docs/building.md gives) finds idem's libraries by their pkg-config
# names, builds only the libraries it uses, runs a consumer, and its
# `meson test` carries none of idem's tests.
#   subproject_check.sh SOURCE_ROOT
set -euo pipefail
root=$1
parent=$(mktemp -d)
trap 'rm -rf "$parent"' EXIT
mkdir "$parent/subprojects"
ln -s "$root" "$parent/subprojects/idem"
sed -n '/^```ini idem.wrap/,/^```$/p' "$root/docs/building.md" | sed '1d;$d' >"$parent/subprojects/idem.wrap"
grep -q '^\[provide\]' "$parent/subprojects/idem.wrap" || { echo "docs/building.md has no idem.wrap block"; exit 1; }
# The documented wrap fetches idem; here it is already in place, which meson takes as it is.
# Every library the wrap names is there by that name (this build has them all).
names=$(sed -n 's/^dependency_names = //p' "$parent/subprojects/idem.wrap" | tr -d ' ' | sed "s/,/', '/g")
cat >"$parent/meson.build" <<MESON
project('consumer', 'cpp', default_options: ['cpp_std=c++20', 'buildtype=release'])
executable('consumer', 'consumer.cpp', dependencies: [dependency('idem'), dependency('idem-sqlite')])
# The documented idem::database example (examples/transfer), through dependency('idem-database').
executable('transfer', '$root/examples/transfer/main.cpp', dependencies: dependency('idem-database'))
foreach name : ['$names']
  assert(dependency(name).found(), name)
endforeach
test('consumer-own-test', find_program('true'))
MESON
cat >"$parent/consumer.cpp" <<'CPP'
#include <idem/idem.hpp>
#include <idem/sqlite_store.hpp>
#include <iostream>
int main(int argc, char** argv) {
    if (argc != 2) return 2;
    idem::executor exec{std::make_shared<idem::sqlite_store>(idem::sqlite_store_options{.path = argv[1]})};
    auto run = [] { return std::string("done"); };
    auto first = exec.execute(idem::record_key("ns", "k"), "fp", {}, run, idem::string_codec{});
    auto again = exec.execute(idem::record_key("ns", "k"), "fp", {}, run, idem::string_codec{});
    std::cout << idem::to_string(first.status()) << " " << idem::to_string(again.status()) << "\n";
}
CPP
cd "$parent"
meson setup build --wrap-mode=nodownload >setup.log || { cat setup.log; exit 1; }
grep -q "Subproject idem finished" setup.log || { cat setup.log; exit 1; }
ninja -C build consumer >/dev/null
out=$(build/consumer "$parent/records.db")
[ "$out" = "executed replayed" ] || { echo "consumer printed: $out"; exit 1; }
ninja -C build transfer >/dev/null
transfer=$(build/transfer --db "sqlite:$parent/bank.db" | tail -1)
[ "$transfer" = "each transfer moved money exactly once" ] || { echo "the database example printed: $transfer"; exit 1; }
tests=$(meson test -C build --list --no-rebuild 2>/dev/null)
[ "$tests" = "consumer-own-test" ] || { printf 'the parent lists these tests:\n%s\n' "$tests"; exit 1; }
for program in idem idem-bench idem-quickstart unit_tests; do
  if [ -n "$(find build -name "$program" -type f)" ] || ninja -C build -t targets all | grep -q "/$program:"; then
    echo "the parent builds idem's $program"; exit 1
  fi
done
echo "parent project: dependency('idem'), dependency('idem-sqlite') -> $out; dependency('idem-database') -> $transfer; its tests: $tests"
