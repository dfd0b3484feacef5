#!/usr/bin/env bash
# pjdfstest (POSIX semantics of chmod, chown, link, mkdir, mkfifo, open, rename, rmdir, symlink,
# truncate, unlink, utimensat, ...) on one mount: `prove -r` of every test file, run as root in
# a fresh directory of the mount, PJDFSTEST_JOBS test files at a time (default 4: the test files
# spend most of their time in `sleep`, waiting for a new second of ctime or mtime, and each makes
# names of its own, so they can share the directory). Exits 0 only when every test passes; the
# full output is LOG.
# usage: Tools/conformance/pjdfstest.sh MOUNTPOINT TOOLS LOG   (TOOLS: third_party/build.sh's OUTDIR)
set -euo pipefail
[[ $# -eq 3 && -d $1 && -x $2/pjdfstest/pjdfstest ]] || { echo "usage: $0 MOUNTPOINT TOOLS LOG" >&2; exit 64; }
mountpoint=$1 tools=$2 log=$3 jobs=${PJDFSTEST_JOBS:-4}
mkdir -p "$mountpoint/pjdfstest"
status=0
(cd "$mountpoint/pjdfstest" && timeout 1800 prove -r -j "$jobs" "$tools/pjdfstest/tests") > "$log" 2>&1 || status=$?
# prove's summary: "Files=238, Tests=8798, ..." and "Result: PASS"; failures are listed above it.
grep -E '^(Files=|Result:)' "$log" | sed "s|^|pjdfstest $(basename "$(dirname "$mountpoint")"): |"
if [[ $status -ne 0 ]]; then
    sed -n '/^Test Summary Report/,$p' "$log" | sed -n 1,40p >&2
fi
exit $status
