#!/usr/bin/env bash
# Reproduces the mount daemon's memory growth (docs/PERFORMANCE.md): an encrypting mamfs mount;
# each iteration writes a new 64 MiB file (dd bs=1M, fsync), drops caches, runs fio 4 KiB
# random reads on it for 4 s and removes it, then prints the daemon's VmRSS, RssAnon, RssFile
# and open descriptors. A daemon that does not grow prints the same figures after the first
# iteration. `small` runs the bench's small-file phases instead: tar x of 5,000 files of 1-16
# KiB in 50 directories, ls -lR, cat of every file, rm -rf, caches dropped before each.
#
# usage: Tools/bench/rss-growth.sh PATH/TO/mamfs [ITERATIONS=6] [randread|randwrite|small]   (root)
# MAMFS_WRAPPER="heaptrack -o /tmp/h" runs the daemon under a profiler (heaptrack_print /tmp/h.zst).
set -euo pipefail
MAMFS="$(readlink -f "$1")"; ITERATIONS="${2:-6}"; RW="${3:-randread}"
WORK="$(mktemp -d /var/tmp/mamfs-rss-XXXXXX)"
mkdir -p "$WORK/backing" "$WORK/mnt"
PID=""
cleanup() {
    if mountpoint -q "$WORK/mnt"; then fusermount3 -u "$WORK/mnt" 2>/dev/null || fusermount3 -uz "$WORK/mnt"; fi
    if [[ -n "$PID" ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
"$MAMFS" init --state "$WORK/state" >/dev/null
"$MAMFS" enroll 8c7f3e1a-0000-4000-8000-000000000001 --upn bench@contoso.com \
    --policy "$(dirname "$0")/../demo/policy-encrypt.json" --state "$WORK/state" >/dev/null
taskset -c 0 ${MAMFS_WRAPPER:-} "$MAMFS" mount "$WORK/backing" "$WORK/mnt" -f --account bench@contoso.com --state "$WORK/state" \
    > "$WORK/daemon.log" 2>&1 &
PID=$!
for _ in $(seq 100); do mountpoint -q "$WORK/mnt" && break; sleep 0.1; done
mountpoint -q "$WORK/mnt" || { echo "mount failed" >&2; cat "$WORK/daemon.log" >&2; exit 1; }
if [[ $RW == small ]]; then
    python3 - "$WORK/tree.tar" <<'PY'
import os, random, sys, tarfile, tempfile
rng = random.Random(6)
with tempfile.TemporaryDirectory(dir=os.path.dirname(sys.argv[1])) as tmp:
    for i in range(5000):
        os.makedirs(os.path.join(tmp, "tree", f"d{i % 50:03}"), exist_ok=True)
        with open(os.path.join(tmp, "tree", f"d{i % 50:03}", f"f{i:05}.bin"), "wb") as f:
            f.write(rng.randbytes(rng.randint(1024, 16384)))
    with tarfile.open(sys.argv[1], "w") as tar:
        tar.add(os.path.join(tmp, "tree"), arcname="tree")
PY
fi
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for i in $(seq "$ITERATIONS"); do
    if [[ $RW == small ]]; then
        mkdir "$WORK/mnt/small"; drop
        taskset -c 0 tar -xf "$WORK/tree.tar" -C "$WORK/mnt/small"; drop
        taskset -c 0 ls -lR "$WORK/mnt/small" > /dev/null; drop
        taskset -c 0 find "$WORK/mnt/small" -type f -exec cat {} + > /dev/null; drop
        taskset -c 0 rm -rf "$WORK/mnt/small"
        printf 'iteration %d: small files  VmRSS %s kB  RssAnon %s kB  RssFile %s kB  threads %s  fds %s\n' "$i" \
            "$(awk '/^VmRSS/ {print $2}' /proc/$PID/status)" "$(awk '/^RssAnon/ {print $2}' /proc/$PID/status)" \
            "$(awk '/^RssFile/ {print $2}' /proc/$PID/status)" "$(awk '/^Threads/ {print $2}' /proc/$PID/status)" \
            "$(ls /proc/$PID/fd | wc -l)"
        continue
    fi
    dd if=/dev/urandom of="$WORK/mnt/f" bs=1M count=64 conv=fsync status=none
    sync; echo 3 > /proc/sys/vm/drop_caches
    iops=$(taskset -c 0 fio --name=x --filename="$WORK/mnt/f" --size=64m --bs=4k --rw="$RW" --ioengine=psync \
        --invalidate=1 --fallocate=none --time_based --runtime=4 --output-format=terse | cut -d';' -f8,49)
    rm -f "$WORK/mnt/f"
    printf 'iteration %d: iops(read;write) %s  VmRSS %s kB  RssAnon %s kB  RssFile %s kB  fds %s\n' "$i" "$iops" \
        "$(awk '/^VmRSS/ {print $2}' /proc/$PID/status)" "$(awk '/^RssAnon/ {print $2}' /proc/$PID/status)" \
        "$(awk '/^RssFile/ {print $2}' /proc/$PID/status)" "$(ls /proc/$PID/fd | wc -l)"
done
