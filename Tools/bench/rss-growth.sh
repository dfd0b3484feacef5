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
# The bench's own tree (run.py's make_tree_tarball), in 50 directories.
[[ $RW == small ]] && PYTHONPATH="$(dirname "$0")" python3 -c \
    'import sys, run; run.make_tree_tarball(sys.argv[1], 5000, 50)' "$WORK/tree.tar"
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# status FIELD: the daemon's FIELD from /proc/PID/status (kB for memory, a count for Threads).
status() { awk -v field="$1:" '$1 == field { print $2 }' /proc/$PID/status; }
for i in $(seq "$ITERATIONS"); do
    if [[ $RW == small ]]; then
        mkdir "$WORK/mnt/small"; drop
        taskset -c 0 tar -xf "$WORK/tree.tar" -C "$WORK/mnt/small"; drop
        taskset -c 0 ls -lR "$WORK/mnt/small" > /dev/null; drop
        taskset -c 0 find "$WORK/mnt/small" -type f -exec cat {} + > /dev/null; drop
        taskset -c 0 rm -rf "$WORK/mnt/small"
        printf 'iteration %d: small files  VmRSS %s kB  RssAnon %s kB  RssFile %s kB  threads %s  fds %s\n' "$i" \
            "$(status VmRSS)" "$(status RssAnon)" "$(status RssFile)" "$(status Threads)" "$(ls /proc/$PID/fd | wc -l)"
        continue
    fi
    dd if=/dev/urandom of="$WORK/mnt/f" bs=1M count=64 conv=fsync status=none
    drop
    iops=$(taskset -c 0 fio --name=x --filename="$WORK/mnt/f" --size=64m --bs=4k --rw="$RW" --ioengine=psync \
        --invalidate=1 --fallocate=none --time_based --runtime=4 --output-format=terse | cut -d';' -f8,49)
    rm -f "$WORK/mnt/f"
    printf 'iteration %d: iops(read;write) %s  VmRSS %s kB  RssAnon %s kB  RssFile %s kB  fds %s\n' "$i" "$iops" \
        "$(status VmRSS)" "$(status RssAnon)" "$(status RssFile)" "$(ls /proc/$PID/fd | wc -l)"
done
