#!/bin/bash
# Builds the libFuzzer target: Tools/fuzz/build.sh OUT [extra swiftc flags]
# (swiftc -sanitize=fuzzer,address over Sources/MAMSystem, then Sources/MAMProtection + FuzzHarness.swift).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-/tmp/mamfs-fuzz/fuzz-format}"
shift || true
mkdir -p "$(dirname "$out")"
modules="$(dirname "$out")/modules"
mkdir -p "$modules"
# MAMProtection imports MAMSystem: built first as a static library with its module.
swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name MAMSystem \
  -I "$root/Sources/CSystem" -emit-library -static -emit-module -emit-module-path "$modules/MAMSystem.swiftmodule" \
  $(find "$root/Sources/MAMSystem" -name '*.swift' | sort) -o "$modules/libMAMSystem.a" "$@"
swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name MAMProtection \
  -I "$root/Sources/COpenSSL" -I "$root/Sources/CSQLite" -I "$root/Sources/CSystem" -I "$modules" \
  $(find "$root/Sources/MAMProtection" -name '*.swift' | sort) "$root/Tools/fuzz/FuzzHarness.swift" \
  -L "$modules" -lMAMSystem -o "$out" "$@"
