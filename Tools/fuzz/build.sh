#!/bin/bash
# Builds the libFuzzer target: Tools/fuzz/build.sh OUT [extra swiftc flags]
# (swiftc -sanitize=fuzzer,address over Sources/MAMSystem, then Sources/MAMProtection + FuzzHarness.swift).
# FUZZ_OPTIMIZE picks the optimization: -O (the default: about 4.5 times the executions per
# second) or -Onone (builds in 40% of -O's CPU time, and keeps Swift's assert() checks).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-/tmp/mamfs-fuzz/fuzz-format}"
shift || true
mkdir -p "$(dirname "$out")"
modules="$(dirname "$out")/modules"
mkdir -p "$modules"
optimize=${FUZZ_OPTIMIZE:--O}
[[ $optimize == -O || $optimize == -Onone ]] || { echo "FUZZ_OPTIMIZE: -O or -Onone, not '$optimize'" >&2; exit 64; }
# MAMProtection imports MAMSystem: built first as a static library with its module.
swiftc "$optimize" -sanitize=fuzzer,address -parse-as-library -module-name MAMSystem \
  -I "$root/Sources/CSystem" -emit-library -static -emit-module -emit-module-path "$modules/MAMSystem.swiftmodule" \
  $(find "$root/Sources/MAMSystem" -name '*.swift' | sort) -o "$modules/libMAMSystem.a" "$@"
swiftc "$optimize" -sanitize=fuzzer,address -parse-as-library -module-name MAMProtection \
  -I "$root/Sources/COpenSSL" -I "$root/Sources/CSQLite" -I "$root/Sources/CSystem" -I "$modules" \
  $(find "$root/Sources/MAMProtection" -name '*.swift' | sort) "$root/Tools/fuzz/FuzzHarness.swift" \
  -L "$modules" -lMAMSystem -o "$out" "$@"
