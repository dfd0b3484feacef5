#!/usr/bin/env bash
# The mamfs demo on real files: a demo state directory, a managed account whose policy requires
# encryption, a mount over a demo backing directory, the licenses in /usr/share/common-licenses
# copied in and read back, their owner and encryption shown, proof that the backing bytes are
# ciphertext, a CLI decrypt of a backing file, an unmount, and a protect-data round trip. Builds nothing: `make demo` builds the
# release binary and passes its path.
#
# usage: Tools/demo.sh PATH/TO/mamfs
# Exits non-zero when any check fails.
set -euo pipefail

if [[ $# -ne 1 || ! -x "$1" ]]; then
    echo "usage: $0 PATH/TO/mamfs (the release binary: make demo)" >&2
    exit 64
fi
MAMFS="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"

DEMO_DIR="$REPO/build/demo"
STATE="$DEMO_DIR/state"
WORK="$DEMO_DIR/work"
ACCOUNT="8c7f3e1a-0000-4000-8000-000000000001"
UPN="demo@contoso.com"
POLICY="$HERE/demo/policy-encrypt.json"
LICENSES=/usr/share/common-licenses
PHRASE="GNU GENERAL PUBLIC LICENSE"
export MAMFS_STATE="$STATE"
unset MAMFS_PASSPHRASE_FILE

failures=0
step() { printf '\n== %s\n' "$*"; }
# Prints a command as typed (paths relative to the work directory), then runs it.
show() { printf '$ %s\n' "$*"; "$@"; }
mamfs() { "$MAMFS" "$@"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; failures=$((failures + 1)); }

# A fresh state directory with the demo managed account.
setup_state() {
    step "State directory $STATE and the demo managed account"
    rm -rf "$DEMO_DIR"
    mkdir -p "$WORK"
    show mamfs init
    show mamfs enroll "$ACCOUNT" --upn "$UPN" --policy Tools/demo/policy-encrypt.json
    show mamfs accounts
    show mamfs policy show "$UPN"
}

# The main job: a mount over a backing directory, used by ordinary programs.
BACKING="$DEMO_DIR/backing"
MOUNTPOINT="$DEMO_DIR/mnt"
MOUNT_LOG="$DEMO_DIR/mount.log"
MOUNTED=0

unmount_demo() {
    if [[ $MOUNTED -eq 1 ]]; then
        "$MAMFS" unmount "$MOUNTPOINT" 2>/dev/null || fusermount3 -uz "$MOUNTPOINT" 2>/dev/null || true
        MOUNTED=0
    fi
}

run_mount_demo() {
    step "Mount $BACKING at $MOUNTPOINT for $UPN (files created there belong to the managed account)"
    mkdir -p "$BACKING" "$MOUNTPOINT"
    trap unmount_demo EXIT
    show mamfs mount "$BACKING" "$MOUNTPOINT" --account "$UPN" -o "log=$MOUNT_LOG"
    MOUNTED=1

    step "Real files from $LICENSES copied in with cp -a"
    show cp -a "$LICENSES" "$MOUNTPOINT/licenses"
    local count=0 same=0 file name
    for file in "$LICENSES"/*; do
        [[ -f "$file" && ! -L "$file" ]] || continue
        name="$(basename "$file")"
        count=$((count + 1))
        if cmp -s "$file" "$MOUNTPOINT/licenses/$name"; then same=$((same + 1)); else fail "$name reads back different"; fi
    done
    [[ $count -gt 0 ]] || { fail "no files in $LICENSES"; return; }
    echo "$same of $count files read back identical through the mount"
    show ls -l "$MOUNTPOINT/licenses" | head -6

    step "Owner and encryption, through the mount (xattrs) and on the backing files (mamfs info)"
    show getfattr --absolute-names -n user.mam.owner "$MOUNTPOINT/licenses/GPL-3"
    show getfattr --absolute-names -n user.mam.encrypted "$MOUNTPOINT/licenses/GPL-3"
    [[ "$(getfattr --absolute-names --only-values -n user.mam.owner "$MOUNTPOINT/licenses/GPL-3")" == "$ACCOUNT" ]] \
        || fail "user.mam.owner is not $ACCOUNT"
    show mamfs info "$BACKING/licenses/GPL-3" "$BACKING/licenses/Apache-2.0"
    local owned
    owned="$(mamfs info --json "$BACKING"/licenses/* | grep -c "\"owner\" : \"$ACCOUNT\"" || true)"
    [[ $owned -ge $count ]] || fail "info: only $owned of $count backing files owned by $ACCOUNT"

    step "The backing bytes are ciphertext"
    printf '$ grep -rl "%s" %s | wc -l\n' "$PHRASE" "$MOUNTPOINT"
    local in_mount in_backing
    in_mount="$(grep -rl "$PHRASE" "$MOUNTPOINT" | wc -l || true)"
    echo "$in_mount"
    printf '$ grep -rl "%s" %s | wc -l\n' "$PHRASE" "$BACKING"
    in_backing="$(grep -rl "$PHRASE" "$BACKING" | wc -l || true)"
    echo "$in_backing"
    [[ $in_mount -gt 0 ]] || fail "the phrase is not visible through the mount"
    [[ $in_backing -eq 0 ]] || fail "the phrase appears in $in_backing backing files"

    step "The CLI reads the same backing files: decrypt one to a copy and compare"
    show mamfs decrypt "$BACKING/licenses/GPL-3" -o "$WORK/GPL-3.decrypted"
    cmp -s "$LICENSES/GPL-3" "$WORK/GPL-3.decrypted" && echo "identical to $LICENSES/GPL-3" || fail "CLI decrypt differs"

    step "Unmount"
    show mamfs unmount "$MOUNTPOINT"
    MOUNTED=0
    FILES_TOTAL=$count
    FILES_SAME=$same
}

run_data_demo() {
    step "Buffer protection: protect-data / unprotect-data"
    local text="Quarterly results, confidential to Contoso."
    local protected plain
    echo "\$ printf '%s' '$text' | mamfs protect-data --account $UPN --base64"
    protected="$(printf '%s' "$text" | mamfs protect-data --account "$UPN" --base64)"
    echo "protected (base64): ${protected:0:60}..."
    plain="$(printf '%s\n' "$protected" | mamfs unprotect-data --base64)"
    echo "unprotected: $plain"
    [[ "$plain" == "$text" ]] || fail "protect-data round trip"
    [[ "$(printf 'never protected' | mamfs unprotect-data)" == "never protected" ]] \
        || fail "unprotect-data of plain input"
}

summary() {
    step "Summary"
    echo "state:     $STATE"
    echo "files:     ${FILES_TOTAL:-0} copied into the mount, ${FILES_SAME:-0} read back identical; backing: ciphertext"
    if [[ $failures -eq 0 ]]; then
        echo "result:    OK"
    else
        echo "result:    $failures check(s) FAILED"
    fi
}

cd "$REPO"
setup_state
run_mount_demo
run_data_demo
summary
[[ $failures -eq 0 ]]
