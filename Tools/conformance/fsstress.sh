#!/usr/bin/env bash
# fsstress (parallel random namespace and data operations) on one mount for SECONDS seconds:
# 4 processes in a fresh directory, stopped with SIGTERM. fsstress expects some operations to
# fail and says nothing about them; what counts is that it ran until stopped (a crash or a hang
# of the mount shows here as another exit) and what check-mount.sh finds afterwards.
# usage: Tools/conformance/fsstress.sh MOUNTPOINT TOOLS SECONDS LOG
set -euo pipefail
[[ $# -eq 4 && -d $1 && -x $2/fsstress ]] || { echo "usage: $0 MOUNTPOINT TOOLS SECONDS LOG" >&2; exit 64; }
mountpoint=$1 tools=$2 seconds=$3 log=$4
mkdir -p "$mountpoint/fsstress"
status=0
seed=${FSSTRESS_SEED:-$(date +%s)}
echo "fsstress: seed $seed (FSSTRESS_SEED=$seed repeats it)"
timeout --kill-after=30 "$seconds" "$tools/fsstress" -d "$mountpoint/fsstress" -p 4 -n 100000 -l 0 -s "$seed" > "$log" 2>&1 || status=$?
# 124: stopped by the timeout, as intended.
if [[ $status -ne 124 ]]; then
    echo "fsstress exited $status before its $seconds s were up; see $log" >&2
    tail -n 20 "$log" >&2
    exit 1
fi
# Its worker processes end with it; wait for stragglers so the mount is idle for the checks.
for _ in $(seq 100); do pgrep -f "$tools/fsstress" >/dev/null || break; sleep 0.1; done
if pgrep -f "$tools/fsstress" >/dev/null; then echo "fsstress processes still running after it was stopped" >&2; exit 1; fi
echo "fsstress: ran $seconds s, $(find "$mountpoint/fsstress" | wc -l) names left"
