#!/usr/bin/env bash
# Sequential dd throughput: the backing directory itself, an encrypting mamfs mount over it,
# and gocryptfs (Debian package), measured in the same run, interleaved round by round, with
# daemon and client pinned (docs/PERFORMANCE.md): "same" = both on CPU 0, "split" = client on
# CPU 0, daemon on CPU 1. Caches are dropped before every write and read.
#
# usage: Tools/bench/dd-compare.sh PATH/TO/mamfs(release) [SIZE_MIB=512] [ROUNDS=3]
# Prints one line per measurement and a median table (MB/s, min-max).
set -euo pipefail
MAMFS="$(readlink -f "$1")"; SIZE="${2:-512}"; ROUNDS="${3:-3}"
command -v gocryptfs >/dev/null || { echo "gocryptfs is not installed (apt-get install gocryptfs)" >&2; exit 69; }
WORK="$(mktemp -d /var/tmp/mamfs-bench-XXXXXX)"
RESULTS="$WORK/results.txt"
: > "$RESULTS"
mounts=()
cleanup() {
    for m in "${mounts[@]}"; do fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
seconds() { date +%s.%N; }

setup() { # $1 = daemon cpu
    local cpu="$1" d="$WORK/cpu$1"
    mkdir -p "$d/plain" "$d/mamfs-backing" "$d/mamfs" "$d/gocryptfs-cipher" "$d/gocryptfs" "$d/state"
    "$MAMFS" init --state "$d/state" >/dev/null
    "$MAMFS" enroll 8c7f3e1a-0000-4000-8000-000000000001 --upn bench@contoso.com \
        --policy "$(dirname "$0")/../demo/policy-encrypt.json" --state "$d/state" >/dev/null
    taskset -c "$cpu" "$MAMFS" mount "$d/mamfs-backing" "$d/mamfs" --account bench@contoso.com --state "$d/state"
    mounts+=("$d/mamfs")
    echo benchmark-passphrase > "$d/pass"
    gocryptfs -q -init -passfile "$d/pass" "$d/gocryptfs-cipher" >/dev/null
    taskset -c "$cpu" gocryptfs -q -passfile "$d/pass" "$d/gocryptfs-cipher" "$d/gocryptfs"
    mounts+=("$d/gocryptfs")
}

measure() { # $1 placement, $2 daemon cpu, $3 fs name, $4 round
    local dir="$WORK/cpu$2/$3" start end
    [[ "$3" == plain ]] && dir="$WORK/cpu$2/plain"
    drop_caches
    start=$(seconds)
    taskset -c 0 dd if=/dev/zero of="$dir/f" bs=1M count="$SIZE" conv=fsync status=none
    end=$(seconds)
    echo "$1 $3 write $(echo "$SIZE * 1.048576 / ($end - $start)" | bc -l)" >> "$RESULTS"
    drop_caches
    start=$(seconds)
    taskset -c 0 dd if="$dir/f" of=/dev/null bs=1M status=none
    end=$(seconds)
    echo "$1 $3 read $(echo "$SIZE * 1.048576 / ($end - $start)" | bc -l)" >> "$RESULTS"
    rm -f "$dir/f"
    tail -2 "$RESULTS" | sed "s/^/round $4: /"
}

setup 0
setup 1
for round in $(seq 1 "$ROUNDS"); do
    for placement in same split; do
        cpu=0; [[ $placement == split ]] && cpu=1
        for fs in plain mamfs gocryptfs; do measure "$placement" "$cpu" "$fs" "$round"; done
    done
done
echo
echo "median MB/s (min-max) of $ROUNDS rounds, $SIZE MiB, dd bs=1M (write with conv=fsync)"
python3 - "$RESULTS" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    placement, fs, op, value = line.split()
    rows[(placement, op, fs)].append(float(value))
for placement in ("same", "split"):
    for op in ("write", "read"):
        cells = []
        base = statistics.median(rows[(placement, op, "plain")])
        for fs in ("plain", "mamfs", "gocryptfs"):
            v = rows[(placement, op, fs)]
            m = statistics.median(v)
            cells.append(f"{fs} {m:7.0f} ({min(v):.0f}-{max(v):.0f}, {m / base:.2f}x)")
        print(f"{placement:5} {op:5} " + "   ".join(cells))
PY
