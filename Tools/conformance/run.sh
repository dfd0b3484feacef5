#!/usr/bin/env bash
# The POSIX conformance suites on real mounts (what `make conformance` and CI run):
#   pjdfstest on a managed (encrypting) and an unmanaged mount, both with allow_other, and at the
#   same time fsx, FSX_SEEDS seeds x FSX_OPS operations with and without mmap, in its own
#   directory of the managed mount (pjdfstest mostly sleeps, so the three share the CPUs well);
#   fsstress for FSSTRESS_SECONDS on the managed mount;
# then on each mount: the daemon is alive and every file reads without an error.
# The suites come from MAMFS_THIRD_PARTY (default: ../shared/third_party beside the repository),
# built into CONFORMANCE_DIR/tools; without that directory the run is skipped (exit 0, saying
# so). Needs root and /dev/fuse. Exits non-zero when any suite or check fails. Wall times per
# part go to CONFORMANCE_DIR/times and are printed at the end.
# usage: Tools/conformance/run.sh PATH/TO/mamfs
set -euo pipefail
[[ $# -eq 1 && -x $1 ]] || { echo "usage: $0 PATH/TO/mamfs" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
MAMFS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
third_party=${MAMFS_THIRD_PARTY:-$repo/../shared/third_party}
WORK=${CONFORMANCE_DIR:-$repo/build/conformance}
seeds=${FSX_SEEDS:-5} ops=${FSX_OPS:-100000} stress_seconds=${FSSTRESS_SECONDS:-60}
source "$here/lib.sh"

if [[ ! -x $third_party/build.sh ]]; then
    note "skipped: no third-party suites at $third_party (set MAMFS_THIRD_PARTY to the directory holding build.sh, pjdfstest/ and xfstests/)"
    exit 0
fi
[[ $(id -u) -eq 0 ]] || { note "needs root (pjdfstest acts as other users; the mounts use allow_other)"; exit 77; }
[[ -c /dev/fuse ]] || { note "needs /dev/fuse"; exit 77; }

mkdir -p "$WORK/logs"
rm -f "$WORK/times" "$WORK/logs"/*
trap unmount_all EXIT
started=$(date +%s)
FAILURES=0

note "building the suites from $third_party"
"$repo/Tools/install-missing-packages.sh" "conformance" autoconf automake gcc make perl xfslibs-dev libattr1-dev
timed build "$third_party/build.sh" "$WORK/tools" > "$WORK/logs/build.log" 2>&1 || { cat "$WORK/logs/build.log" >&2; fail "building the suites"; exit 1; }
tools=$WORK/tools

mount_kind managed
managed=$MOUNT_POINT
mount_kind unmanaged
unmanaged=$MOUNT_POINT
managed_pid=$(daemon_pid "$managed") unmanaged_pid=$(daemon_pid "$unmanaged")
note "managed mount $managed (daemon $managed_pid), unmanaged mount $unmanaged (daemon $unmanaged_pid), $("$MAMFS" --version)"

note "pjdfstest on both mounts; fsx on the managed mount: $seeds seeds x $ops operations, with and without mmap"
timed fsx "$here/fsx.sh" "$managed" "$tools" "$seeds" "$ops" "$WORK/logs" &
fsx_job=$!
timed pjdfstest-managed "$here/pjdfstest.sh" "$managed" "$tools" "$WORK/logs/pjdfstest-managed.log" &
managed_job=$!
timed pjdfstest-unmanaged "$here/pjdfstest.sh" "$unmanaged" "$tools" "$WORK/logs/pjdfstest-unmanaged.log" &
unmanaged_job=$!
wait $managed_job || fail "pjdfstest on the managed mount"
wait $unmanaged_job || fail "pjdfstest on the unmanaged mount"
wait $fsx_job || fail "fsx"
timed check-unmanaged "$here/check-mount.sh" "$unmanaged" "$unmanaged_pid" || fail "the unmanaged mount after pjdfstest"

note "fsstress on the managed mount for $stress_seconds s"
timed fsstress "$here/fsstress.sh" "$managed" "$tools" "$stress_seconds" "$WORK/logs/fsstress.log" || fail "fsstress"
timed check-managed "$here/check-mount.sh" "$managed" "$managed_pid" || fail "the managed mount after the suites"

unmount_all
printf 'total %d\n' $(($(date +%s) - started)) >> "$WORK/times"
note "wall times (s): $(tr '\n' ' ' < "$WORK/times")"
if [[ $FAILURES -gt 0 ]]; then
    note "$FAILURES part(s) FAILED; logs in $WORK/logs"
    exit 1
fi
note "all suites passed"
