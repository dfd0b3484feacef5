#!/bin/bash
# Builds the libFuzzer target: Tools/fuzz/build.sh OUT [extra swiftc flags]
# (swiftc -sanitize=fuzzer,address over Sources/MAMSystem, then Sources/MAMProtection + FuzzHarness.swift,
# with Sources/CCipher compiled by clang -fsanitize=address).
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
# MAMProtection's AES-256-GCM is C (Sources/CCipher): one object, with its module map.
clang_optimize=$([[ $optimize == -O ]] && echo -O2 || echo -O0)
clang "$clang_optimize" -fsanitize=address -I "$root/Sources/CCipher/include" \
  -c "$root/Sources/CCipher/CCipher.c" -o "$modules/CCipher.o"
swiftc "$optimize" -sanitize=fuzzer,address -parse-as-library -module-name MAMProtection \
  -I "$root/Sources/COpenSSL" -I "$root/Sources/CSQLite" -I "$root/Sources/CSystem" \
  -I "$root/Sources/CCipher/include" -I "$modules" \
  $(find "$root/Sources/MAMProtection" -name '*.swift' | sort) "$root/Tools/fuzz/FuzzHarness.swift" \
  "$modules/CCipher.o" -L "$modules" -lMAMSystem -o "$out" "$@"
