#!/usr/bin/env bash
# The wraps in subprojects/ are fallbacks for systems without Debian's
# packages: with the packages installed a build uses none of them, whether
# fallbacks are allowed (the default, wrap_mode=nodownload) or forbidden
# (--wrap-mode=nofallback). Each wrap names the dependency it provides.
#   wraps_check.sh SOURCE_ROOT
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for wrap in "$root"/subprojects/*.wrap; do
  grep -q '^source_hash = [0-9a-f]\{64\}$' "$wrap" && grep -q '^\[provide\]' "$wrap" ||
    { echo "$wrap: no source_hash or [provide]"; exit 1; }
done
for mode in default-options nofallback; do
  args=()
  [ "$mode" = nofallback ] && args=(--wrap-mode=nofallback)
  meson setup "$work/$mode" "$root" "${args[@]}" >"$work/$mode.log" || { cat "$work/$mode.log"; exit 1; }
  subprojects=$(meson introspect --projectinfo "$work/$mode" |
                python3 -c 'import json, sys; print(" ".join(s["name"] for s in json.load(sys.stdin)["subprojects"]))')
  [ -z "$subprojects" ] || { echo "$mode: the build uses subprojects: $subprojects"; exit 1; }
  grep -q "Run-time dependency cpp-httplib found: YES" "$work/$mode.log" || { echo "$mode: cpp-httplib not from Debian"; exit 1; }
  echo "$mode: configured with Debian's packages, no subproject"
done
