#!/usr/bin/env bash
# Times the file providers on a real tree, next to rsync -a of the same tree in the same run:
#   - replicated: the first full `mamfs provider sync` of a copy of /usr/share/doc;
#   - non-replicated: materializing 1,000 files through a mount (first open of each);
#   - rsync -a of the whole tree, and of the same 1,000 files.
# Managed account with the encrypting demo policy (provided copies are encrypted).
#
# usage: Tools/bench/provider-timing.sh PATH/TO/mamfs(release) [TREE=/usr/share/doc] [ROUNDS=3]
set -euo pipefail
MAMFS="$(readlink -f "$1")"; TREE="${2:-/usr/share/doc}"; ROUNDS="${3:-3}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d /var/tmp/mamfs-provider-bench-XXXXXX)"
MNT="$WORK/mnt"
cleanup() { fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
seconds() { date +%s.%N; }
elapsed() { echo "$2 - $1" | bc -l | cut -c1-6; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

cp -a "$TREE" "$WORK/remote"
files=$(find "$WORK/remote" -type f | wc -l)
(cd "$WORK/remote" && find . -type f | sort) > "$WORK/all"; sed -n 1,1000p "$WORK/all" > "$WORK/list"
export MAMFS_STATE="$WORK/state"
"$MAMFS" init >/dev/null
"$MAMFS" enroll 8c7f3e1a-0000-4000-8000-000000000001 --upn bench@contoso.com --policy "$HERE/../demo/policy-encrypt.json" >/dev/null
echo "tree: $TREE ($files files, $(du -sh "$WORK/remote" | cut -f1)); $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
    rm -rf "$WORK/replica" "$WORK/rsync" "$WORK/rsync1000" "$WORK/backing"; mkdir -p "$WORK/replica" "$WORK/backing" "$MNT"
    drop_caches; s=$(seconds)
    "$MAMFS" provider sync "$WORK/replica" --remote "$WORK/remote" --account bench@contoso.com >/dev/null
    e=$(seconds); sync_time=$(elapsed "$s" "$e")

    drop_caches; s=$(seconds)
    rsync -a "$WORK/remote/" "$WORK/rsync/"
    e=$(seconds); rsync_time=$(elapsed "$s" "$e")

    "$MAMFS" mount "$WORK/backing" "$MNT" --remote "$WORK/remote" --provider non-replicated --account bench@contoso.com
    drop_caches; s=$(seconds)
    (cd "$MNT" && xargs -d '\n' cat < "$WORK/list" > /dev/null)
    e=$(seconds); materialize_time=$(elapsed "$s" "$e")
    "$MAMFS" unmount "$MNT"

    drop_caches; s=$(seconds)
    rsync -a --files-from="$WORK/list" "$WORK/remote/" "$WORK/rsync1000/"
    e=$(seconds); rsync1000_time=$(elapsed "$s" "$e")
    echo "round $round: replicated first sync ${sync_time}s | rsync -a tree ${rsync_time}s | non-replicated materialize 1000 ${materialize_time}s | rsync -a 1000 files ${rsync1000_time}s"
done
