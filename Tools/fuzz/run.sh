#!/bin/bash
# Runs the libFuzzer target for a bounded time:
#   Tools/fuzz/run.sh MAMFS_BIN SECONDS [WORKDIR]
# Builds Tools/fuzz (build.sh), makes a state and a seed corpus (valid encrypted and
# plain-tagged buffers from `mamfs protect-data`, the format test vectors), fuzzes, and
# copies any crash input to WORKDIR/crashes. Prints "fuzz: N executions, C crashes".
# FUZZ_OPTIMIZE (-O, the default, or -Onone) is handed to build.sh.
# Exit 0 = no crash, 1 = crash found, 2 = setup failed (e.g. libFuzzer does not link).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mamfs="$1"; seconds="$2"; work="${3:-/tmp/mamfs-fuzz}"
mkdir -p "$work/corpus" "$work/crashes"
bin="$work/fuzz-format${FUZZ_OPTIMIZE:--O}"
if [ ! -x "$bin" ] || [ -n "$(find "$root/Sources/MAMProtection" "$root/Sources/MAMSystem" "$root/Tools/fuzz" -newer "$bin" -name '*.swift' -print -quit)" ]; then
  "$root/Tools/fuzz/build.sh" "$bin" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 2; }
fi
state="$work/state"
rm -rf "$state"
"$mamfs" init --state "$state" >/dev/null && \
"$mamfs" enroll 8c7f3e1a-0000-4000-8000-000000000001 --policy "$root/Tools/demo/policy-encrypt.json" --state "$state" >/dev/null || exit 2
for n in 0 1 5 100 4095 4096 4097 9000; do
  head -c "$n" /dev/urandom | "$mamfs" protect-data --account 8c7f3e1a-0000-4000-8000-000000000001 --state "$state" > "$work/corpus/enc-$n" || exit 2
  head -c "$n" /dev/urandom | "$mamfs" protect-data --account '' --state "$state" > "$work/corpus/plain-$n" || exit 2
done
python3 - "$root/Tools/format-vectors.json" "$work/corpus" <<'PY' || true
import json, sys, binascii
v = json.load(open(sys.argv[1]))
def walk(o, path=""):
    if isinstance(o, dict):
        for k, x in o.items(): walk(x, path + "-" + k)
    elif isinstance(o, list):
        for i, x in enumerate(o): walk(x, path + "-" + str(i))
    elif isinstance(o, str) and len(o) >= 26 and len(o) % 2 == 0:
        try: b = binascii.unhexlify(o)
        except Exception: return
        if b[:8] == b"\x89MAMFS\r\n": open(sys.argv[2] + "/vec" + path[:60], "wb").write(b)
walk(v)
PY
MAMFS_FUZZ_STATE="$state" "$bin" "$work/corpus" -max_total_time="$seconds" -max_len=20000 -timeout=10 \
  -rss_limit_mb=2048 -artifact_prefix="$work/crashes/" -print_final_stats=1 >"$work/fuzz.log" 2>&1
status=$?
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$')
crashes=$(ls "$work/crashes" | wc -l)
echo "fuzz: ${runs:-0} executions, $crashes crashes (log $work/fuzz.log)"
[ "$status" -eq 0 ] && [ "$crashes" -eq 0 ] || { tail -40 "$work/fuzz.log" >&2; exit 1; }
