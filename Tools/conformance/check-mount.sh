#!/usr/bin/env bash
# After a suite: the mount's daemon is still alive and the mount answers, and every regular
# file in it reads to the end without an error (an EIO would mean a torn or wrongly encrypted
# block). Exits 0 when both hold; lists the files that failed otherwise.
# usage: Tools/conformance/check-mount.sh MOUNTPOINT DAEMON_PID
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 MOUNTPOINT DAEMON_PID" >&2; exit 64; }
mountpoint=$1 pid=$2
kill -0 "$pid" 2>/dev/null || { echo "the daemon (pid $pid) of $mountpoint is gone" >&2; exit 1; }
grep -q " $mountpoint fuse.mamfs " /proc/mounts || { echo "$mountpoint is no longer a mamfs mount" >&2; exit 1; }
stat "$mountpoint" >/dev/null || { echo "$mountpoint does not answer" >&2; exit 1; }
files=0 failed=0
while IFS= read -r -d '' file; do
    files=$((files + 1))
    if ! cat -- "$file" > /dev/null 2>"$mountpoint.read-error"; then
        failed=$((failed + 1))
        echo "cannot read $file: $(cat "$mountpoint.read-error")" >&2
    fi
done < <(find "$mountpoint" -type f -print0)
rm -f "$mountpoint.read-error"
kill -0 "$pid" 2>/dev/null || { echo "the daemon (pid $pid) of $mountpoint died while its files were read" >&2; exit 1; }
echo "check $(basename "$(dirname "$mountpoint")"): daemon $pid alive, $files files read, $failed failed"
exit $((failed > 0))
