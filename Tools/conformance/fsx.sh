#!/usr/bin/env bash
# fsx (random read/write/truncate/mmap/fallocate/punch/copy_range checked against an in-memory
# model) on one mount: SEEDS seeds x OPS operations with mmap, then the same without mmap
# (-W -R), the seeds of each round in parallel, each on its own file. Exits 0 only when every
# run completes; the output of each is in LOGDIR/fsx-MODE-SEED.log (and fsx's own .fsxlog next to
# its file on a failure, copied into LOGDIR).
# usage: Tools/conformance/fsx.sh MOUNTPOINT TOOLS SEEDS OPS LOGDIR
set -euo pipefail
[[ $# -eq 5 && -d $1 && -x $2/fsx ]] || { echo "usage: $0 MOUNTPOINT TOOLS SEEDS OPS LOGDIR" >&2; exit 64; }
mountpoint=$1 tools=$2 seeds=$3 ops=$4 logs=$5
mkdir -p "$mountpoint/fsx" "$logs"
failed=0
for mode in mmap nommap; do
    flags=()
    [[ $mode == nommap ]] && flags=(-W -R)
    pids=()
    for seed in $(seq 1 "$seeds"); do
        timeout 1800 "$tools/fsx" -q -N "$ops" -S "$seed" "${flags[@]}" "$mountpoint/fsx/$mode-$seed" \
            > "$logs/fsx-$mode-$seed.log" 2>&1 &
        pids+=($!)
    done
    for index in "${!pids[@]}"; do
        seed=$((index + 1))
        status=0
        wait "${pids[$index]}" || status=$?
        if [[ $status -eq 0 ]]; then
            echo "fsx $mode seed $seed: $(tail -n 1 "$logs/fsx-$mode-$seed.log")"
        else
            failed=$((failed + 1))
            echo "fsx $mode seed $seed: FAILED (exit $status), see $logs/fsx-$mode-$seed.log" >&2
            tail -n 20 "$logs/fsx-$mode-$seed.log" >&2
            cp "$mountpoint/fsx/$mode-$seed".fsx* "$logs/" 2>/dev/null || true
        fi
    done
done
exit $((failed > 0))
