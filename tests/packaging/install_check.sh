#!/usr/bin/env bash
# `meson install` puts headers, libraries, pkg-config files and the idem
# command in place. The installed command runs with no LD_LIBRARY_PATH, also
# after the tree is moved (a --prefix install is the same tree elsewhere), and
# programs build against the installed tree with pkg-config alone and with
# CMake's pkg_check_modules, as README.md's "Use idem in your project" shows.
# The .pc files of a SQLite user require nothing of PostgreSQL, and idem_sql
# links no driver.
#   install_check.sh BUILD_DIR COMPILER
set -euo pipefail
build=$1 cxx=$2
dest=$(mktemp -d)
trap 'rm -rf "$dest" "$dest.moved"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild >/dev/null
pcdir=$(dirname "$(find "$dest" -name idem.pc | head -1)")
libdir=$(dirname "$pcdir")
# pkg-config reads the .pc files from the destdir and puts the destdir before
# every path in them: as README.md documents for a --destdir install.
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest

# The command, with no LD_LIBRARY_PATH: its RUNPATH finds idem's libraries.
idem=$(find "$dest" -path '*/bin/idem' | head -1)
[ -x "$idem" ] || { echo "the idem command is not installed"; exit 1; }
check_command() {
  env -u LD_LIBRARY_PATH "$1" --help | grep -q "idem: operate idempotency records" || { echo "$1 --help failed"; exit 1; }
  derived=$(env -u LD_LIBRARY_PATH "$1" key derive refund order-1 r-2)
  [ "$derived" = "6:refund|7:order-1|3:r-2" ] || { echo "$1 key derive printed: $derived"; exit 1; }
}
check_command "$idem"
cp -a "$dest" "$dest.moved"
check_command "${idem/#$dest/$dest.moved}"
echo "installed idem runs in place and moved: $derived"

# The .pc files require only what each library needs.
for pc in idem-sql idem-sqlite; do
  [ -f "$pcdir/$pc.pc" ] || continue
  if grep -E 'libpq|soci_postgresql' "$pcdir/$pc.pc"; then echo "$pc.pc mentions PostgreSQL"; exit 1; fi
  pkg-config --cflags --libs "$pc" >/dev/null
done
sql=$(find "$libdir" -name 'libidem_sql.so.*' | head -1)
if [ -n "$sql" ] && readelf -d "$sql" | grep -E 'NEEDED.*(libpq|soci_postgresql|sqlite3)'; then
  echo "libidem_sql links a driver"; exit 1
fi

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
expect_replay() {
  local out
  out=$(env LD_LIBRARY_PATH="$libdir" "$1")
  [ "$out" = "executed replayed" ] || { echo "$1 printed: $out"; exit 1; }
}

# pkg-config.
# shellcheck disable=SC2046
"$cxx" -std=c++20 "$dest/consumer.cpp" $(pkg-config --cflags --libs idem-memory) -o "$dest/consumer"
expect_replay "$dest/consumer"
echo "pkg-config consumer: executed replayed"

# CMake, through pkg_check_modules (the README's CMakeLists.txt). The sysroot
# stands for a whole system, so Debian's own .pc files (fmt, libcrypto) point
# into it too, and CMake wants every include directory to exist.
mkdir -p "$dest/cmake" "$dest/usr/include"
sed -n '/^```cmake/,/^```$/p' "$(dirname "$0")/../../README.md" | sed '1d;$d' >"$dest/cmake/CMakeLists.txt"
grep -q pkg_check_modules "$dest/cmake/CMakeLists.txt" || { echo "README.md has no CMake example"; exit 1; }
cp "$dest/consumer.cpp" "$dest/cmake/main.cpp"
cmake -S "$dest/cmake" -B "$dest/cmake/build" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
cmake --build "$dest/cmake/build" >/dev/null
expect_replay "$dest/cmake/build/app"
echo "CMake consumer (pkg_check_modules): executed replayed"
