#!/bin/bash
# Builds the libFuzzer target: Tools/fuzz/build.sh OUT [extra swiftc flags]
# (swiftc -sanitize=fuzzer,address over Sources/MAMProtection + FuzzHarness.swift).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-/tmp/mamfs-fuzz/fuzz-format}"
shift || true
mkdir -p "$(dirname "$out")"
swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name MAMProtection \
  -I "$root/Sources/COpenSSL" -I "$root/Sources/CSQLite" -I "$root/Sources/CSystem" \
  $(find "$root/Sources/MAMProtection" -name '*.swift' | sort) "$root/Tools/fuzz/FuzzHarness.swift" \
  -o "$out" "$@"
