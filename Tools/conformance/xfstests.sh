#!/usr/bin/env bash
# xfstests on a managed (encrypting) mamfs mount, by the recipe in MAMFS_THIRD_PARTY's
# xfstests-fuse.md (default: ../shared/third_party beside the repository). Meant for a scratch
# machine: it installs the build dependencies, creates the users xfstests needs (fsgqa, fsgqa2,
# 123456-fsgqa), installs /sbin/mount.fuse.mamfsx, builds a copy of xfstests-full in
# XFSTESTS_DIR (default build/xfstests) and runs ./check with ARGS (default: -g generic/quick
# -e generic/103, about 25 min). Results are in XFSTESTS_DIR/results-mamfs.
# XFSTESTS_FS=gocryptfs runs the same tests on gocryptfs instead (the peer the results are
# compared with; /sbin/mount.fuse.gocryptfsx, results in XFSTESTS_DIR/results-gocryptfs).
# mamfs lists two attributes of its own on every file (user.mam.owner, user.mam.encrypted):
# xfstests-mamfs-attrs.patch leaves them out of the getfattr and listxattr output the tests
# compare, as the tests already leave out the attributes of other namespaces.
# usage: Tools/conformance/xfstests.sh PATH/TO/mamfs [CHECK_ARGS...]
set -euo pipefail
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 PATH/TO/mamfs [CHECK_ARGS...]" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
MAMFS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
check_args=("$@")
fs=${XFSTESTS_FS:-mamfs}
[[ $fs == mamfs || $fs == gocryptfs ]] || { echo "XFSTESTS_FS must be mamfs or gocryptfs" >&2; exit 64; }
((${#check_args[@]})) || check_args=(-g generic/quick -e generic/103)
third_party=${MAMFS_THIRD_PARTY:-$repo/../shared/third_party}
WORK=${XFSTESTS_DIR:-$repo/build/xfstests}
source "$here/lib.sh"

if [[ ! -d $third_party/xfstests-full ]]; then
    note "skipped: no xfstests at $third_party/xfstests-full (set MAMFS_THIRD_PARTY)"
    exit 0
fi
[[ $(id -u) -eq 0 ]] || { note "xfstests needs root"; exit 77; }

"$repo/Tools/install-missing-packages.sh" "xfstests" autoconf automake libtool gcc make xfslibs-dev uuid-dev \
    libattr1-dev libacl1-dev libaio-dev liburing-dev libgdbm-dev xfsprogs acl attr bc e2fsprogs fio psmisc quota gawk
for user in fsgqa fsgqa2 123456-fsgqa; do
    id "$user" >/dev/null 2>&1 || useradd -m "$user"
done

src=$WORK/src
if [[ ! -x $src/ltp/fsx ]]; then
    note "building xfstests in $src"
    rm -rf "$src" && mkdir -p "$WORK" && cp -r "$third_party/xfstests-full" "$src"
    patch -s "$src/common/rc" < "$third_party/xfstests-fuse-rc.patch"
    make -C "$src" -j"$(nproc)" > "$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log" >&2; exit 1; }
fi

grep -q _filter_mamfs_attrs "$src/common/attr" || patch -s -d "$src" -p0 < "$here/xfstests-mamfs-attrs.patch"
if [[ $fs == mamfs ]]; then
    # One state with the managed account; two backing directories and mount points.
    state=$WORK/state
    if [[ ! -d $state ]]; then
        "$MAMFS" init --state "$state" >/dev/null
        printf '{"fileEncryptionRequired": true}\n' > "$WORK/policy.json"
        "$MAMFS" enroll "$MANAGED_ACCOUNT" --upn "$MANAGED_UPN" --policy "$WORK/policy.json" --state "$state" >/dev/null
    fi
    sed -e "s|@MAMFS@|$MAMFS|" -e "s|@ACCOUNT@|$MANAGED_UPN|" -e "s|@STATE@|$state|" \
        "$here/xfstests-mount-helper" > /sbin/mount.fuse.mamfsx
    chmod 0755 /sbin/mount.fuse.mamfsx
    subtype=.mamfsx
else
    "$repo/Tools/install-missing-packages.sh" "xfstests on gocryptfs" gocryptfs
    printf 'xfstests\n' > "$WORK/gocryptfs.pass" && chmod 0600 "$WORK/gocryptfs.pass"
    sed -e "s|@PASSFILE@|$WORK/gocryptfs.pass|" "$here/xfstests-gocryptfs-helper" > /sbin/mount.fuse.gocryptfsx
    chmod 0755 /sbin/mount.fuse.gocryptfsx
    subtype=.gocryptfsx
fi
base=$WORK/$fs
mkdir -p "$base/test-backing" "$base/scratch-backing" "$base/test" "$base/scratch" "$WORK/bin"
install -m 0755 "$here/xfstests-umount" "$WORK/bin/umount"
config=$WORK/local.config-$fs
cat > "$config" <<CONFIG
export TEST_DEV=$base/test-backing
export TEST_DIR=$base/test
export SCRATCH_DEV=$base/scratch-backing
export SCRATCH_MNT=$base/scratch
export FSTYP=fuse
export FUSE_SUBTYP=$subtype
export RESULT_BASE=$WORK/results-$fs
export MOUNT_OPTIONS="-oallow_other"
export TEST_FS_MOUNT_OPTS="-oallow_other"
CONFIG

cleanup() {
    local mountpoint
    for mountpoint in "$base/test" "$base/scratch"; do
        grep -q " $mountpoint " /proc/mounts && { fusermount3 -u "$mountpoint" 2>/dev/null || fusermount3 -uz "$mountpoint"; }
    done
    return 0
}
trap cleanup EXIT
if [[ $fs == mamfs ]]; then version="mamfs $("$MAMFS" --version)"; else version="gocryptfs $(gocryptfs -version | sed -n 1p)"; fi
note "./check ${check_args[*]} ($version, results in $WORK/results-$fs)"
started=$(date +%s)
status=0
(cd "$src" && HOST_OPTIONS=$config PATH="$WORK/bin:$PATH" ./check "${check_args[@]}") || status=$?
note "xfstests took $(($(date +%s) - started)) s, exit $status"
exit $status
